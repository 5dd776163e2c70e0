set -eu
if [ -s /opt/harness/env/requirements.txt ]; then
    /opt/harness/venv/bin/python -m pip install --no-index --no-cache-dir --disable-pip-version-check --no-deps \
        --find-links /opt/harness/env/wheels -r /opt/harness/env/requirements.txt
fi
bash /opt/harness/env/link-scripts.sh
