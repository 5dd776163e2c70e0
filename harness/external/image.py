"""The image a third-party agent runs in: the session's image plus one layer holding the agent.

FROM the given base (the sandbox image, or a task's or instance's image built on it), the layer adds:

- a venv at /opt/agents/<install name>, made with the image's own /usr/bin/python3 and filled offline
  (`pip install --no-index --find-links`) with the exact pins uv resolves on the host as of the agent's
  `as_of` date (`harness.environments.resolver`, cached), from wheels downloaded on the host once
  (`harness.environments.wheelhouse`); never on PATH, so `python` there stays the project's. It is
  made in a first stage and copied into the final one, so the wheels are not in the image;
- /testbed, a symbolic link to /workspace (SWE-bench prompts name /testbed);
- a git identity and `safe.directory` in the system git config where the base has none, so an agent's
  `git diff`, `git status` and `git stash` work.

The Dockerfile is fixed text (chosen by whether the agent installs anything); the requirements are a
file of the context, the base image a build argument, and the build runs with no network. The tag is
`harness-env:agent-<install name>-<hash>` of the base image's id, the agent's pins and the wheels'
sha256, so a second call only looks the tag up. Labels: the hash, kind "agent", and BASE_LABEL naming
the sandbox image the base descends from (so `harness sandbox prune` removes it with that image).
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
from harness.external.spec import TESTBED, AgentSpec
from sandbox import (
    BASE_LABEL,
    PYTHON_LABEL,
    WORKDIR,
    ImageError,
    Progress,
    build_context,
    client_or_default,
    image_exists,
    quiet,
)

__all__ = ["AGENT_LABEL", "MIN_PYTHON", "agent_dockerfile", "agent_image_tag", "ensure_agent_image"]

IMAGE_VERSION = "1"                      # part of every tag: bump it when the layer's recipe changes
AGENT_LABEL = "harness.agent.name"
MIN_PYTHON = (3, 10)                     # what the packaged agents (litellm) need of /usr/bin/python3
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


def agent_dockerfile(*, installs: bool) -> str:
    """The agent layer's Dockerfile: fixed text, chosen only by whether the agent installs packages."""
    return _HEAD + (_STAGE if installs else "") + _FINAL.replace("{copy}", _COPY if installs else "")


def agent_image_tag(base_id: str, agent: AgentSpec, pins: Sequence[str], wheels_digest: str) -> str:
    """The tag of `agent`'s image on the base image whose id is `base_id`, with the resolved `pins` whose
    wheels hash to `wheels_digest`."""
    recipe = agent_dockerfile(installs=bool(agent.requirements))
    h = hashlib.sha256(json.dumps([IMAGE_VERSION, base_id, list(agent.requirements), agent.install_name,
                                   list(pins), wheels_digest, recipe]).encode())
    return f"{REPOSITORY}:agent-{agent.install_name or 'none'}-{h.hexdigest()[:16]}"


def ensure_agent_image(base_image: str, agent: AgentSpec, *, progress: Progress = quiet,
                       client: docker.DockerClient | None = None) -> str:
    """The tag of the image holding `agent` on `base_image`, built if it does not exist yet (the wheels are
    downloaded on the host the first time, then kept in the cache).

    Raises:
        EnvironmentBuildError: the base image is missing or not a harness image, its Python is too old,
            the wheels could not be downloaded, or the build failed (the message holds pip's or
            Docker's words).
    """
    client = client_or_default(client)
    base = _inspect(client, base_image)
    pins, wheels = _wheels(base_image, base.labels, agent, progress) if agent.requirements else ((), None)
    digest_of_wheels = _wheels_digest(wheels) if wheels is not None else ""
    tag = agent_image_tag(base.id, agent, pins, digest_of_wheels)
    digest = tag.rsplit("-", 1)[-1]
    with build_lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        progress(f"building the agent image {tag}: {agent.name} "
                 f"({' '.join(agent.requirements) or 'nothing to install'}) on {base_image}")
        new_labels = {HASH_LABEL: digest, KIND_LABEL: "agent", AGENT_LABEL: agent.install_name or "none",
                      BASE_LABEL: base.labels.get(BASE_LABEL) or base_image}
        with tempfile.TemporaryDirectory(prefix="harness-agent-") as tmp:
            ctx = Path(tmp)
            (ctx / "Dockerfile").write_text(agent_dockerfile(installs=wheels is not None))
            if wheels is not None:
                shutil.copytree(wheels, ctx / "wheels", ignore=shutil.ignore_patterns(".complete"))
                (ctx / "requirements.txt").write_text("".join(pin + "\n" for pin in pins))
            args = {"BASE_IMAGE": base_image, "BASE_USER": base.user, "BASE_WORKDIR": base.workdir,
                    **({"AGENT_HOME": agent.home} if wheels is not None else {})}
            try:
                build_context(client, ctx, tag, labels=new_labels, progress=progress, buildargs=args)
            except ImageError as exc:
                raise EnvironmentBuildError(f"the image of agent {agent.name} on {base_image}: {exc}") from exc
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag


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


def _wheels(base_image: str, labels: dict[str, str], agent: AgentSpec,
            progress: Progress) -> tuple[tuple[str, ...], Path]:
    """The exact pins of `agent`'s requirements and all their dependencies on the base image's Python (its
    PYTHON_LABEL), resolved by uv as of `agent.as_of` (cached), and the host's folder of their wheels."""
    python = labels.get(PYTHON_LABEL, "")
    try:
        version = tuple(int(part) for part in python.split("."))
    except ValueError:
        version = ()
    if len(version) != 2:
        raise EnvironmentBuildError(f"the base image {base_image!r} has no {PYTHON_LABEL} label (got {python!r}); "
                                    "expected an image built on the harness's sandbox image, e.g. "
                                    "harness-sandbox:py3.11")
    if version < MIN_PYTHON:
        raise EnvironmentBuildError(f"agent {agent.name} needs Python {'.'.join(map(str, MIN_PYTHON))} or later "
                                    f"in the image, and {base_image!r} has /usr/bin/python3 {python}; use a "
                                    "session image for Python 3.11 (e.g. --python 3.11)")
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
