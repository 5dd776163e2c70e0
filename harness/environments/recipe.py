"""The recipe of resolved environments: the paths, the fixed Dockerfile texts and the scripts they run.

Two images per recipe task (`venv_image.py` and `instance_image.py` build them):

- the **environment image** (one per lock, `lock.py`): FROM the sandbox image, a venv at /opt/harness/venv
  made with `python3 -m venv --without-pip` and given its pip, setuptools and wheel from their own wheels
  (Debian's pip never installs anything), then the lock's distributions installed offline with
  `--no-deps` (the lock is complete). The lock's sdists are built into wheels first, in an image of
  their own (`sdist_image.py`, `sdist_dockerfile`), network-less, with the lock's toolchain and no build
  isolation; the environment image copies the wheels from it.
- the **instance image** (one per task): the environment image plus one layer (`instance_layer.py`): in a
  network-less build container the project is unpacked into a tmpfs /workspace, `pre_install` and the
  install command run there offline as the agent user, the project's packages are imported from /,
  and what the install added or changed under /workspace is saved to /opt/harness/overlay, which the
  sandbox copies onto its fresh /workspace at start. What the build changed in the container's own
  filesystem becomes the layer (`container_scripts/layer_diff.py`, run as root); the tests' variables
  are ENV of the image's config.

The scripts are files of `harness/container_scripts/` (`VENV_SCRIPTS`, `INSTANCE_BUILD`, `LAYER_SCRIPT`,
`VENV_LINK`); the paths and markers below are the ones they name (tests/evaluation/
test_container_scripts.py holds them equal).

The sandbox's exec environment has a fixed PATH, so the venv is put first through /usr/local/bin:
`python`, `python3` and `python3.X` there are tiny exec wrappers (a symlink would not activate the venv:
Python looks for pyvenv.cfg beside the link), every other venv script is symlinked (its shebang names
the venv's interpreter). Scripts are relinked after the project's install.

Nothing a task supplies is pasted into a Dockerfile except the test variables and the environment key
(a label), validated and quoted (`env_lines`, `label_line`); commands are files run with bash.
"""

from __future__ import annotations

import re

from harness.container_scripts import script_text
from harness.core.task import Environment
from harness.environments.errors import EnvironmentBuildError, EnvironmentUnsupported
from harness.environments.lock import Lock
from sandbox.images import TOOLCHAIN_PACKAGES

RECIPE_VERSION = "4"        # bump whenever what an image holds changes without its inputs changing
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
LAYER_DIR = "/opt/harness/layer"      # root's: the layer script, its notes and the layer (in no image)
VENV_SCRIPTS = ("make-venv.sh", "link-scripts.sh", "build-sdists.sh", "install-deps.sh")
INSTANCE_BUILD = "instance_build.py"  # run by the build's user with the venv's Python
LAYER_SCRIPT = "layer_diff.py"        # run by root with the system's, before and after it
VENV_LINK = "venv_link.py"            # installed in the system interpreter's site folder

# Every instruction is a step that costs seconds on a slow storage driver: the texts keep them few (labels
# are one LABEL line, `labels()`; WORKDIR inherited).
SDIST_DOCKERFILE = f"""\
ARG BASE_IMAGE
FROM ${{BASE_IMAGE}}
USER root
COPY env/ {ENV_DIR}/
COPY sdists/ {ENV_DIR}/sdists/
RUN bash {ENV_DIR}/make-venv.sh && bash {ENV_DIR}/build-sdists.sh
"""


def sdist_dockerfile(labels: dict[str, str]) -> str:
    """The image of a lock's source-only releases built into wheels (in /opt/harness/env/built), with the
    lock's toolchain and wheels: the environment image copies the wheels from it."""
    return SDIST_DOCKERFILE + label_line(labels)


def env_dockerfile(*, sdists: bool, labels: dict[str, str], rows: bool = False) -> str:
    """The environment image's Dockerfile: fixed text; with sdists, their wheels come from the image
    `sdist_dockerfile` made (the build argument SDISTS_IMAGE). With `rows` (the lock carries wheels its rows
    require beyond it, `Lock.row_wheels`), the venv's installed distributions are the agent user's too: a
    row's install, run as that user, replaces what its tree excludes (pylint-7080 downgrades astroid),
    as the official harness's pip, run as root, does. Without, the text is the one it always was."""
    own = f" && chown -R 1000:1000 {VENV}" if rows else ""
    return ("ARG BASE_IMAGE\n" + ("ARG SDISTS_IMAGE\nFROM ${SDISTS_IMAGE} AS sdists\n" if sdists else "")) + f"""\
FROM ${{BASE_IMAGE}}
USER root
COPY env/ {ENV_DIR}/
{f"COPY --from=sdists {ENV_DIR}/built/ {ENV_DIR}/wheels/" if sdists else ""}
RUN bash {ENV_DIR}/make-venv.sh && bash {ENV_DIR}/install-deps.sh{own}
ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_NO_INDEX=1 PIP_FIND_LINKS={ENV_DIR}/wheels PIP_DISABLE_PIP_VERSION_CHECK=1
USER agent
{label_line(labels)}"""


def venv_scripts() -> dict[str, str]:
    """The environment image's build scripts (`harness/container_scripts/`), by their names in the image."""
    return {name: script_text(name) for name in VENV_SCRIPTS}


def env_files(lock: Lock) -> dict[str, str]:
    """The text files of a lock's build context (env/): what to install, and the scripts that do it."""
    wheels = [f.pin() for f in lock.packages if f.kind == "wheel"]
    return {"toolchain.txt": "".join(f.pin() + "\n" for f in lock.toolchain),
            "requirements.txt": "".join(f.pin() + "\n" for f in lock.packages),
            "wheel-requirements.txt": "".join(p + "\n" for p in wheels), **venv_scripts()}


VENV_LINK_PTH = "import harness_venv_link\n"


def venv_link_files(python: str) -> dict[str, bytes]:
    """The system interpreter's files (root's) that give the venv to a process started through a link
    (`container_scripts/venv_link.py`, installed as the module `harness_venv_link`)."""
    folder = f"/usr/local/lib/python{python}/dist-packages"
    return {f"{folder}/harness_venv_link.py": script_text(VENV_LINK).encode(),
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


def unsupported(task_id: str, env: Environment) -> None:
    """Raise EnvironmentUnsupported when the recipe cannot be followed offline (`offline_blocker`)."""
    if env.offline_blocker:
        raise EnvironmentUnsupported(task_id, env.offline_blocker)


def system_packages(env: Environment | None) -> tuple[str, ...]:
    """The Debian packages the environment's base image needs beyond the sandbox image's: the recipe's
    own (`apt_packages`) and, for a project that compiles extensions, a C toolchain with Python's headers."""
    if env is None:
        return ()
    return tuple(sorted({*env.apt_packages, *(TOOLCHAIN_PACKAGES if env.compiled else ())}))
