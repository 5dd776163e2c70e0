set -eu
version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
/usr/bin/python3 -m venv --without-pip /opt/harness/venv
pip_wheel=$(ls /opt/harness/env/wheels/pip-*.whl | head -n 1)
/opt/harness/venv/bin/python "$pip_wheel/pip" install --no-index --no-cache-dir --disable-pip-version-check \
    --find-links /opt/harness/env/wheels -r /opt/harness/env/toolchain.txt
for name in python python3 "python$version"; do
    rm -f "/usr/local/bin/$name"    # the image's python there is a link to /usr/bin/python3: never write through it
    printf '#!/bin/sh\nexec /opt/harness/venv/bin/python "$@"\n' > "/usr/local/bin/$name"
    chmod 755 "/usr/local/bin/$name"
done
bash /opt/harness/env/link-scripts.sh
/usr/bin/python3 -c pass    # the system interpreter is intact
mkdir -p /opt/harness/instance /opt/harness/overlay
chown -R 1000:1000 /opt/harness/venv /usr/local/bin /opt/harness/instance /opt/harness/overlay
