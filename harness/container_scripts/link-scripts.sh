set -eu
for script in /opt/harness/venv/bin/*; do
    name=$(basename "$script")
    case "$name" in python*|activate*|Activate*) continue ;; esac
    ln -sf "$script" "/usr/local/bin/$name"
done
