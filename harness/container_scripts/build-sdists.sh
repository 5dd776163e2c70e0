set -u
mkdir -p /opt/harness/env/built
if [ -s /opt/harness/env/wheel-requirements.txt ]; then
    /opt/harness/venv/bin/python -m pip install --no-index --no-cache-dir --no-deps --find-links /opt/harness/env/wheels \
        -r /opt/harness/env/wheel-requirements.txt >/dev/null 2>&1 || true
fi
failed=""
for sdist in /opt/harness/env/sdists/*; do
    [ -f "$sdist" ] || continue
    echo "building a wheel of $(basename "$sdist")"
    if ! /opt/harness/venv/bin/python -m pip wheel --no-index --no-cache-dir --no-deps --no-build-isolation \
            --find-links /opt/harness/env/wheels -w /opt/harness/env/built "$sdist" >/tmp/sdist.log 2>&1; then
        # beside the venv's packages the build can fail where it would not alone (an old importlib_metadata
        # breaking setuptools' own): again in pip's isolated build environment, its build requirements
        # alone, from the wheelhouse
        echo "  did not build beside the venv's packages; again with its build requirements alone"
        if ! /opt/harness/venv/bin/python -m pip wheel --no-index --no-cache-dir --no-deps --use-pep517 \
                --find-links /opt/harness/env/wheels -w /opt/harness/env/built "$sdist" >/tmp/sdist-alone.log 2>&1; then
            tail -n 12 /tmp/sdist.log
            echo "  alone:"
            tail -n 12 /tmp/sdist-alone.log
            failed="$failed $(basename "$sdist")"
        fi
    fi
done
if [ -n "$failed" ]; then
    echo "harness: sdists that did not build:$failed"
    exit 1
fi
