"""The recipe of resolved environments: fixed Dockerfile texts and the scripts they run, as data.

Two images per task (see `resolved.py` for when each is built):

- the **environment image** (one per environment key, Python and resolution): FROM the sandbox image,
  a venv at /opt/harness/venv made with `python3 -m venv --without-pip` and given its pip, setuptools
  and wheel from their own wheels (Debian's pip never installs anything), then the resolved pins
  installed offline with `--no-deps` (uv's resolution is complete). sdist-only pins are built into wheels
  in a first stage of the same network-less build, with the era's toolchain and no build isolation.
- the **instance image** (one per task): the environment image plus one layer (`instance.py`): in a
  network-less build container the project is unpacked into a tmpfs /workspace, `pre_install` and the
  install command run there offline as the agent user, the project's packages are imported from /,
  and what the install added or changed under /workspace is saved to /opt/harness/overlay, which the
  sandbox copies onto its fresh /workspace at start. What the build changed in the container's own
  filesystem becomes the layer (`LAYER_SCRIPT`, run as root); the tests' variables are ENV of the image's config.

The sandbox's exec environment has a fixed PATH, so the venv is put first through /usr/local/bin:
`python`, `python3` and `python3.X` there are tiny exec wrappers (a symlink would not activate the venv:
Python looks for pyvenv.cfg beside the link), every other venv script is symlinked (its shebang names
the venv's interpreter). Scripts are relinked after the project's install.

Nothing a task supplies is pasted into a Dockerfile except the test variables and the environment key
(a label), validated and quoted (`env_lines`, `label_line`); commands are files run with bash.
"""

from __future__ import annotations

import re

from harness.environments.errors import EnvironmentBuildError

RECIPE_VERSION = "3"        # bump whenever what an image holds changes without its inputs changing
VENV = "/opt/harness/venv"
ENV_DIR = "/opt/harness/env"
OVERLAY = "/opt/harness/overlay"
INSTANCE_DIR = "/opt/harness/instance"   # the instance build's steps (agent-owned in the environment image)
PROJECT_ARCHIVE = "/opt/harness/project/workspace.tar"   # the project in an instance image (root's, read-only)
TOOLCHAIN = ("pip", "setuptools", "wheel")
# The toolchain is resolved as of the project's date but never before the first date at which that
# interpreter was usable with it: pip 20.3 / setuptools 51 (< 60, the distutils-era editable installs
# old projects expect) on 3.9, pip 22.3 / setuptools 65 on 3.11, pip 24.2 / setuptools 75 on 3.13.
TOOLCHAIN_FLOOR = {"3.9": "2021-01-01", "3.11": "2022-11-01", "3.13": "2024-10-08"}
FAILED_SDISTS = "harness: sdists that did not build:"
INSTALL_FAILED = "harness: the project's install failed"
IMPORT_FAILED = "harness: the project does not import:"

# Every instruction is a step that costs seconds on a slow storage driver: the texts keep them few (labels
# are one LABEL line, `labels()`; the sdist stage only when there are sdists; WORKDIR inherited).
SDIST_STAGE = f"""\
ARG BASE_IMAGE
FROM ${{BASE_IMAGE}} AS sdists
USER root
COPY env/ {ENV_DIR}/
COPY sdists/ {ENV_DIR}/sdists/
RUN bash {ENV_DIR}/make-venv.sh && bash {ENV_DIR}/build-sdists.sh

"""


def env_dockerfile(*, sdists: bool, labels: dict[str, str]) -> str:
    """The environment image's Dockerfile: fixed text, with a first stage that builds sdists if there are any."""
    return (SDIST_STAGE if sdists else "ARG BASE_IMAGE\n") + f"""\
FROM ${{BASE_IMAGE}}
USER root
COPY env/ {ENV_DIR}/
{f"COPY --from=sdists {ENV_DIR}/built/ {ENV_DIR}/wheels/" if sdists else ""}
RUN bash {ENV_DIR}/make-venv.sh && bash {ENV_DIR}/install-deps.sh
ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_NO_INDEX=1 PIP_FIND_LINKS={ENV_DIR}/wheels PIP_DISABLE_PIP_VERSION_CHECK=1
USER agent
{label_line(labels)}"""


MAKE_VENV = f"""\
set -eu
version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
/usr/bin/python3 -m venv --without-pip {VENV}
pip_wheel=$(ls {ENV_DIR}/wheels/pip-*.whl | head -n 1)
{VENV}/bin/python "$pip_wheel/pip" install --no-index --no-cache-dir --disable-pip-version-check \\
    --find-links {ENV_DIR}/wheels -r {ENV_DIR}/toolchain.txt
for name in python python3 "python$version"; do
    rm -f "/usr/local/bin/$name"    # the image's python there is a link to /usr/bin/python3: never write through it
    printf '#!/bin/sh\\nexec {VENV}/bin/python "$@"\\n' > "/usr/local/bin/$name"
    chmod 755 "/usr/local/bin/$name"
done
bash {ENV_DIR}/link-scripts.sh
/usr/bin/python3 -c pass    # the system interpreter is intact
mkdir -p {INSTANCE_DIR} {OVERLAY}
chown -R 1000:1000 {VENV} /usr/local/bin {INSTANCE_DIR} {OVERLAY}
"""

LINK_SCRIPTS = f"""\
set -eu
for script in {VENV}/bin/*; do
    name=$(basename "$script")
    case "$name" in python*|activate*|Activate*) continue ;; esac
    ln -sf "$script" "/usr/local/bin/$name"
done
"""

BUILD_SDISTS = f"""\
set -u
mkdir -p {ENV_DIR}/built
if [ -s {ENV_DIR}/wheel-requirements.txt ]; then
    {VENV}/bin/python -m pip install --no-index --no-cache-dir --no-deps --find-links {ENV_DIR}/wheels \\
        -r {ENV_DIR}/wheel-requirements.txt >/dev/null 2>&1 || true
fi
failed=""
for sdist in {ENV_DIR}/sdists/*; do
    [ -f "$sdist" ] || continue
    echo "building a wheel of $(basename "$sdist")"
    if ! {VENV}/bin/python -m pip wheel --no-index --no-cache-dir --no-deps --no-build-isolation \\
            --find-links {ENV_DIR}/wheels -w {ENV_DIR}/built "$sdist" >/tmp/sdist.log 2>&1; then
        tail -n 12 /tmp/sdist.log
        failed="$failed $(basename "$sdist")"
    fi
done
if [ -n "$failed" ]; then
    echo "{FAILED_SDISTS}$failed"
    exit 1
fi
"""

INSTALL_DEPS = f"""\
set -eu
if [ -s {ENV_DIR}/requirements.txt ]; then
    {VENV}/bin/python -m pip install --no-index --no-cache-dir --disable-pip-version-check --no-deps \\
        --find-links {ENV_DIR}/wheels -r {ENV_DIR}/requirements.txt
fi
bash {ENV_DIR}/link-scripts.sh
"""

# Run in the instance build container with the venv's Python (3.9 and up: no newer syntax). It unpacks
# the project into /workspace, snapshots it, runs pre-install.sh and install.sh there, checks the
# imports from /, and copies what the install added or changed to the overlay.
INSTANCE_BUILD = f'''\
import json, os, shutil, subprocess, sys, time

WORK, HERE, OVERLAY, PROJECT = "/workspace", "{INSTANCE_DIR}", "{OVERLAY}", "{PROJECT_ARCHIVE}"
SKIP = {{".git", "__pycache__"}}


def snapshot():
    # what identifies a file's content here: a write changes its ctime (which no process sets back), a
    # replacement its inode; reading every file to hash it cost a second a pass on a django-sized tree
    files = {{}}
    for top, dirs, names in os.walk(WORK):
        dirs[:] = [d for d in dirs if d not in SKIP]
        for name in names:
            path = os.path.join(top, name)
            if os.path.islink(path):
                files[path] = "link:" + os.readlink(path)
            elif os.path.isfile(path):
                st = os.lstat(path)
                files[path] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
    return files


def run(script, log):
    if not os.path.getsize(script):
        return True
    return subprocess.call(["bash", "-e", script], cwd=WORK, stdout=log, stderr=subprocess.STDOUT) == 0


def top_level_names():
    names, own = [], []
    for base in (WORK, os.path.join(WORK, "src")):
        for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            top = os.path.join(base, entry, "top_level.txt")
            if entry.endswith(".egg-info") and os.path.isfile(top):
                listed = [n.strip() for n in open(top).read().split() if n.strip()]
                names += listed
                # the distribution's own package, when listed, is the one to import: others may be shims
                # that raise ImportError on purpose (pydicom 1.x's `dicom`)
                own += [n for n in listed if n.lower() == entry[:-len(".egg-info")].lower().replace("-", "_")]
    if own:
        return sorted(set(own))
    if names:
        return sorted(set(n for n in names if n.isidentifier()))
    skip = {{"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "scripts", "tools", "bin"}}
    for base in (WORK, os.path.join(WORK, "src")):
        for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            if entry not in skip and entry.isidentifier() and os.path.isfile(os.path.join(base, entry, "__init__.py")):
                names.append(entry)
    return names


def link_scripts():
    """Link the venv's new scripts (the project's console scripts: django-admin, pylint) into
    /usr/local/bin, first on the sandbox's PATH. Not link-scripts.sh: as the build's user it stopped at
    the root-owned link of the venv's __pycache__ folder, before any script."""
    bin_dir = "{VENV}/bin"
    for name in sorted(os.listdir(bin_dir)):
        script, link = os.path.join(bin_dir, name), os.path.join("/usr/local/bin", name)
        if name.startswith(("python", "activate", "Activate")) or not os.path.isfile(script):
            continue
        if os.path.lexists(link):
            if not os.path.islink(link) or os.readlink(link) == script:
                continue      # a wrapper of ours, or linked already
            os.remove(link)
        os.symlink(script, link)


SPENT = []


def spent(what, since):
    SPENT.append("%s %.1fs" % (what, time.monotonic() - since))
    return time.monotonic()


def main():
    t = time.monotonic()
    subprocess.check_call(["tar", "-x", "--no-same-owner", "-p", "-f", PROJECT, "-C", WORK])
    settings = json.load(open(os.path.join(HERE, "settings.json")))
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS="{ENV_DIR}/wheels", PIP_NO_CACHE_DIR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    if not os.path.isdir(os.path.join(WORK, ".git")):
        env.setdefault("SETUPTOOLS_SCM_PRETEND_VERSION", settings["scm_version"])
    os.environ.update(env)
    t = spent("unpack", t)
    before = snapshot()
    t = spent("snapshot", t)
    with open("/tmp/install.log", "w") as log:
        ok = run(os.path.join(HERE, "pre-install.sh"), log) and run(os.path.join(HERE, "install.sh"), log)
    t = spent("install", t)
    tail = open("/tmp/install.log", errors="replace").read().splitlines()[-40:]
    print("\\n".join(tail))
    if not ok:
        print("{INSTALL_FAILED}")
        return 1
    link_scripts()
    where = "/" if settings["installed"] else WORK
    for name in top_level_names():
        check = subprocess.run([sys.executable, "-c", "import " + name], cwd=where,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if check.returncode != 0:
            print(check.stdout[-3000:])
            print("{IMPORT_FAILED} " + name + " (from " + where + ")")
            return 1
        print("imports: " + name)
    t = spent("import check", t)
    after = snapshot()
    t = spent("snapshot", t)
    changed = sorted(p for p, h in after.items() if before.get(p) != h)
    for path in changed:
        dest = OVERLAY + path[len(WORK):]
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(path, dest, follow_symlinks=False)
    os.makedirs(OVERLAY, exist_ok=True)
    print("overlay: %d file(s) added or changed by the install" % len(changed))
    spent("overlay", t)
    print("time: " + ", ".join(SPENT))
    return 0


sys.exit(main())
'''

LAYER_DIR = "/opt/harness/layer"      # root's: the layer script, its notes and the layer (in no image)

# The instance's layer, run as root (with CAP_DAC_READ_SEARCH, to read whatever the build's user wrote)
# from a root-owned folder, before the build script ("before": the names, and the start) and after it
# ("after": the layer). Nothing the build's user runs can change this script, its notes or the layer:
# a process left behind by the project's install cannot forge the layer, which may only hold what that
# user could change, with the true owners and modes, as `docker commit` would.
LAYER_SCRIPT = f'''\
import os, subprocess, sys, tarfile

HERE = "{LAYER_DIR}"
BEFORE, STARTED, LAYER = HERE + "/before", HERE + "/started", HERE + "/layer.tar"


def mount_points():
    with open("/proc/self/mountinfo") as handle:
        points = {{line.split()[4].replace("\\\\040", " ") for line in handle}}
    return points - {{"/"}}


# the container's own filesystem: never its mounts (the tmpfs /workspace, /tmp, /home/agent; docker's
# /etc/hosts), this folder, the build's steps nor the project archive (the host adds it)
OUTSIDE = mount_points() | {{"/proc", "/sys", "/dev", HERE, "{INSTANCE_DIR}", "{PROJECT_ARCHIVE.rsplit("/", 1)[0]}"}}


def found(*tests):
    out = subprocess.run(["/usr/bin/find", "/", "-xdev", *tests, "-print0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout
    paths = (p.decode("utf-8", "surrogateescape") for p in out.split(b"\\0") if p)
    skip = tuple(top + "/" for top in OUTSIDE)
    return [p for p in paths if p != "/" and p not in OUTSIDE and not p.startswith(skip)]


def before():
    """The names only (a stat of every file through fuse-overlayfs took seconds), and the start."""
    with open(BEFORE, "wb") as handle:
        handle.write("\\0".join(found()).encode("utf-8", "surrogateescape"))
    open(STARTED, "w").close()


def after():
    """Every entry whose status changed since the start (the kernel sets the ctime of whatever is
    written, created, renamed, linked or chmod-ed, and nothing sets it back), and a whiteout (.wh.NAME)
    for each listed entry that is gone and whose folder stays; a folder comes before what it holds."""
    changed = sorted(found("-cnewer", STARTED))
    with open(BEFORE, "rb") as handle:
        listed = [p.decode("utf-8", "surrogateescape") for p in handle.read().split(b"\\0") if p]
    gone = set(listed) - set(found())
    with tarfile.open(LAYER, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in changed:
            tar.add(path, arcname=path.lstrip("/"), recursive=False)
        for path in sorted(gone):
            if os.path.dirname(path) not in gone:
                name = os.path.join(os.path.dirname(path), ".wh." + os.path.basename(path))
                tar.addfile(tarfile.TarInfo(name.lstrip("/")))
    print("layer: %d entries changed or added, %d removed" % (len(changed), len(gone)))


before() if sys.argv[1:] == ["before"] else after()
'''

# Python 3.9 finds a venv's pyvenv.cfg only beside the program it was started as: a process started
# through a link to the venv's python from elsewhere runs as the system interpreter without the venv.
# tox-current-env makes exactly such links (.tox/py39/bin/python -> sys.executable), and sphinx 3.4+
# runs its tests as `python -X dev -m pytest` through them (docutils missing, every test failed).
# This module, imported by a .pth file of the system interpreter's site folder, puts the venv's
# site-packages (and its .pth files: the project's egg-link) before the system's dist-packages in
# such a process, and only there.
VENV_LINK_MODULE = f'''"""The harness venv for a process started through a link to its python from outside it."""
import os
import sys

VENV_BIN = "{VENV}/bin"


def _through_venv_link():
    path = sys.executable
    for _ in range(16):
        if not path or not os.path.islink(path):
            return False
        target = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
        if os.path.dirname(target) == VENV_BIN:
            return os.path.dirname(path) != VENV_BIN
        path = target
    return False


if sys.prefix == sys.base_prefix and _through_venv_link():
    import glob
    import site
    before = list(sys.path)
    for folder in glob.glob("{VENV}/lib/python*/site-packages"):
        site.addsitedir(folder)
    added = [p for p in sys.path if p not in before]
    rest = [p for p in sys.path if p not in added]
    at = next((i for i, p in enumerate(rest) if p.endswith("dist-packages")), len(rest))
    sys.path[:] = rest[:at] + added + rest[at:]
'''
VENV_LINK_PTH = "import harness_venv_link\n"


def venv_link_files(python: str) -> dict[str, bytes]:
    """The system interpreter's files (root's) that give the venv to a process started through a link."""
    folder = f"/usr/local/lib/python{python}/dist-packages"
    return {f"{folder}/harness_venv_link.py": VENV_LINK_MODULE.encode(),
            f"{folder}/harness-venv-link.pth": VENV_LINK_PTH.encode()}


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def label_line(labels: dict[str, str]) -> str:
    """One LABEL instruction (one build step) with every label quoted."""
    return ("LABEL " + " ".join(f"{k}={_quoted(v)}" for k, v in sorted(labels.items())) + "\n") if labels else ""


def _quoted(value: str) -> str:
    if any(c in value for c in "\n\r\0"):
        raise EnvironmentBuildError(f"label value {value!r} holds a newline or NUL")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def env_lines(test_env: tuple[tuple[str, str], ...], task_id: str) -> str:
    """ENV lines for the tests' variables, each checked (a plain name, a value without newlines or NUL)
    and quoted for the Dockerfile (backslash, double quote and $ escaped).

    Raises:
        EnvironmentBuildError: a name or value is refused; every violation is listed.
    """
    problems = []
    for name, value in test_env:
        if not (isinstance(name, str) and _NAME.fullmatch(name)):
            problems.append(f"name {name!r} is not a plain variable name (expected e.g. LANG)")
        if not isinstance(value, str) or any(c in value for c in "\n\r\0"):
            problems.append(f"value of {name!r} must be a string without newlines or NUL, got {value!r}")
    if problems:
        raise EnvironmentBuildError(f"task {task_id}: test environment variables refused: " + "; ".join(problems))
    return ("ENV " + " ".join(f"{n}={_quoted(v)}" for n, v in test_env) + "\n") if test_env else ""
