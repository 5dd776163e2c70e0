"""What `harness eval` checks before its first environment build or session (docs/evaluation.md).

Each check returns the problems it found, each with the exit code it deserves (2 bad input, 3 the
environment or infrastructure); `run_preflight` gathers them all and raises one error listing every
problem, so an operator fixes everything in one go and no container is started for a run that could
not succeed. The checks:

- **model**: the spec names a model that can be made (`models.factory.make_model`: a missing API key
  is refused there); with a base URL (`--base-url`, `OPENAI_BASE_URL`), the server accepts a TCP
  connection within a few seconds. Nothing is sent to it, the key least of all. `gold` needs every
  task to have a gold patch;
- **Docker**: the daemon answers (`sandbox.docker_client.client_or_default`);
- **disk**: an estimate of what the environments still to build will take (the images that exist
  count nothing) plus a reserve, against the free space of Docker's data root (`docker info`'s
  DockerRootDir).

The instance file (every bad row at once) and the instances' sources are checked when the instances
are loaded (`instance_files.load_instances`); `check_repo_urls` checks a `--repo-url` is reachable before
anything is cloned from it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import docker

from harness.config import Config, Secrets
from harness.core.sources import cache_dir, clone_url
from harness.core.task import Task
from harness.environments import REPOSITORY, env_hash
from harness.errors import ConfigError, HarnessError, TaskError
from harness.models.factory import make_model, resolve_auto
from sandbox.docker_client import client_or_default
from sandbox.errors import DockerUnavailable
from sandbox.images import image_exists, image_tag

USAGE, INFRA = 2, 3
CONNECT_TIMEOUT = 3.0                   # seconds to wait for a model server's or git server's TCP handshake
GIB = 1 << 30
# What one environment still to build takes in Docker's data root, measured on the shipped tasks and on
# SWE-bench rows (`docker system df -v`): an offline sandbox image with its Debian base about 0.6 GiB,
# a pinned-requirements layer up to 0.1 GiB, a resolved (SWE-bench) venv environment up to 1.5 GiB and
# its instance layer about three times the project's source. Rounded up: this is an estimate.
SANDBOX_IMAGE_BYTES = 700 << 20
PINNED_ENV_BYTES = 150 << 20
RESOLVED_ENV_BYTES = 1536 << 20
DEFAULT_RESERVE_GIB = 2.0               # kept free beyond the estimate (containers' writable layers, logs)


@dataclass(frozen=True)
class Problem:
    code: int                           # USAGE (bad input) or INFRA (environment, infrastructure)
    message: str


class PreflightFailed(HarnessError):
    """The environment cannot run this evaluation (exit 3); `problems` lists why."""

    def __init__(self, message: str, problems: list[Problem]) -> None:
        super().__init__(message)
        self.problems = problems


class PreflightRefused(ConfigError):
    """The evaluation's input is wrong (exit 2); `problems` lists every mistake found."""

    def __init__(self, message: str, problems: list[Problem]) -> None:
        super().__init__(message)
        self.problems = problems


def raise_problems(problems: list[Problem]) -> None:
    """Raise one error naming every problem: exit 2 when any is bad input, else 3. Nothing if none."""
    if not problems:
        return
    lines = "\n  - ".join(p.message for p in problems)
    message = (f"preflight: {len(problems)} problem(s) found before any environment was built or session "
               f"started:\n  - {lines}")
    if any(p.code == USAGE for p in problems):
        raise PreflightRefused(message, problems)
    raise PreflightFailed(message, problems)


def run_preflight(tasks: list[Task], model: str | None, config: Config, secrets: Secrets, *, workers: int,
                  reserve_gib: float = DEFAULT_RESERVE_GIB, check_disk: bool = True) -> None:
    """Every check above; raises `PreflightRefused` (exit 2) or `PreflightFailed` (exit 3) listing all
    the problems found. `model` is None when given predictions are graded (no model runs)."""
    problems = check_model(model, tasks, config, secrets) if model is not None else []
    client, docker_problems = check_docker()
    problems += docker_problems
    if client is not None and check_disk:
        problems += check_disk_space(client, tasks, config, workers=workers, reserve_gib=reserve_gib)
    raise_problems(problems)


def check_model(spec: str, tasks: list[Task], config: Config, secrets: Secrets) -> list[Problem]:
    """The model can be made, and its server, when a base URL names one, accepts a connection."""
    if spec == "gold":
        missing = sorted(t.id for t in tasks if not t.gold_patch)
        return [Problem(USAGE, f"--model gold replays each task's gold patch, and {len(missing)} task(s) have "
                               f"none: {', '.join(missing[:20])}; give tasks with gold.patch, or leave these "
                               "out with --instance-ids")] if missing else []
    if spec == "empty":
        return []
    try:
        spec = resolve_auto(spec, config, secrets)
        agent = config.loop.agent is not None
        # replay: every task's recording, below; a scripted plan must name every task: each is made
        for task in tasks[:1] if spec.startswith("replay:") else tasks if spec.startswith("scripted:") else [None]:
            make_model(spec, config, secrets, task=task, for_agent=agent)
    except ConfigError as exc:
        return [Problem(USAGE, f"--model {spec}: {exc}")]
    if spec.startswith("replay:"):
        folder = Path(spec.partition(":")[2])
        missing = sorted(t.id for t in tasks if not (folder / f"{t.id}.traj.json").is_file())
        return [Problem(USAGE, f"--model {spec} replays DIR/<instance_id>.traj.json, and {len(missing)} instance(s) "
                               f"have none in {folder}: {', '.join(missing[:20])}; leave them out with "
                               "--instance-ids, e.g. --instance-ids django__django-11099")] if missing else []
    provider = spec.partition(":")[0]
    base_url = config.model.base_url or (secrets.openai_base_url if provider == "openai" else None)
    if provider in ("openai", "anthropic") and base_url:
        return check_server(base_url, f"the model server of --model {spec}")
    return []


def check_server(url: str, what: str) -> list[Problem]:
    """`url`'s host accepts a TCP connection within CONNECT_TIMEOUT; nothing is sent."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return [Problem(USAGE, f"{what}: {url!r} is not an http(s) URL; expected e.g. http://localhost:8000/v1")]
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return [Problem(USAGE, f"{what}: {url!r} has a bad port ({exc}); expected e.g. http://localhost:8000/v1")]
    reason = _connect(parts.hostname, port)
    if reason is None:
        return []
    return [Problem(INFRA, f"{what} at {url} is not reachable ({reason} connecting to {parts.hostname}:{port} "
                           f"within {CONNECT_TIMEOUT:.0f}s); start the server, or correct --base-url")]


def _connect(host: str, port: int) -> str | None:
    """None if `host:port` accepts a connection, else why not."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            return None
    except TimeoutError:
        return "timed out"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def check_docker() -> tuple[docker.DockerClient | None, list[Problem]]:
    try:
        return client_or_default(), []
    except DockerUnavailable as exc:
        return None, [Problem(INFRA, f"Docker is not available: {exc}")]


def check_disk_space(client: docker.DockerClient, tasks: list[Task], config: Config, *, workers: int,
                     reserve_gib: float) -> list[Problem]:
    """The environments still to build, estimated, fit in the free space of Docker's data root."""
    needed, parts = estimate_build_bytes(client, tasks, config)
    root, free = docker_free_space(client)
    if free is None:
        return []                       # a remote daemon: its disk cannot be seen from here
    reserve = int(reserve_gib * GIB) + workers * (256 << 20)
    if needed + reserve <= free:
        return []
    detail = ", ".join(f"{n} {what}" for what, n in parts.items() if n) or "nothing to build"
    return [Problem(INFRA, f"not enough disk for this evaluation: the environments to build ({detail}) need "
                           f"about {needed / GIB:.1f} GiB, plus {reserve / GIB:.1f} GiB kept free "
                           f"(--disk-reserve {reserve_gib:g} and {workers} worker(s)), and Docker's data root "
                           f"{root} has {free / GIB:.1f} GiB free. Free space with `harness sandbox prune` or "
                           "`docker image prune`, evaluate fewer instances (--instance-ids), lower the reserve "
                           "(--disk-reserve 0), or skip this check with --skip-disk-check")]


def estimate_build_bytes(client: docker.DockerClient, tasks: Iterable[Task],
                         config: Config) -> tuple[int, dict[str, int]]:
    """Bytes the images missing for `tasks` will take, and how many of each kind are missing."""
    counts = {"sandbox image(s)": 0, "pinned environment(s)": 0, "resolved environment(s)": 0}
    total, seen = 0, set()
    for task in tasks:
        base = _sandbox_base(client, config, task.python)
        if base is None and ("sandbox", task.python) not in seen:
            seen.add(("sandbox", task.python))
            counts["sandbox image(s)"] += 1
            total += SANDBOX_IMAGE_BYTES
        if task.environment is not None:    # one environment per version (its lock), a layer per instance
            total += 3 * _tree_bytes(Path(task.repo_dir))
            key = ("resolved", str(task.environment.version_of or task.id))
            extra, kind = RESOLVED_ENV_BYTES, "resolved environment(s)"
        else:
            digest = env_hash(task, base) if base is not None else f"new-{task.python}-{sorted(task.requirements)}"
            if base is not None and image_exists(client, f"{REPOSITORY}:{digest}"):
                continue
            key, extra, kind = ("pinned", digest), PINNED_ENV_BYTES, "pinned environment(s)"
        if key not in seen:
            seen.add(key)
            counts[kind] += 1
            total += extra
    return total, counts


def _sandbox_base(client: docker.DockerClient, config: Config, python: str) -> str | None:
    """The sandbox image tasks of `python` are built on, if it exists already."""
    if config.sandbox.image != "auto":
        return config.sandbox.image
    modes = ("registry", "debootstrap") if config.sandbox.base == "auto" else (config.sandbox.base,)
    for mode in modes:
        tag = image_tag(python, mode)
        if image_exists(client, tag):
            return tag
    return None


def _tree_bytes(root: Path, cap: int = 1 << 30) -> int:
    """The size of the files under `root` (links not followed), counted up to `cap`."""
    total = 0
    for base, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                continue                # gone meanwhile: it takes no space
            if total > cap:
                return total
    return total


def docker_free_space(client: docker.DockerClient) -> tuple[str, int | None]:
    """Docker's data root and its free bytes; None when it is not on this machine (a remote daemon)."""
    info: Mapping[str, Any] = client.info()
    root = str(info.get("DockerRootDir") or "/var/lib/docker")
    try:
        stats = os.statvfs(root)
    except OSError:
        return root, None
    return root, stats.f_bavail * stats.f_frsize


def check_repo_urls(repos: Iterable[str], template: str) -> list[Problem]:
    """Each repository not yet cloned into the cache can be had from `template`: a file:// mirror
    exists, a server accepts a connection (nothing is sent). Other schemes are left to git."""
    problems: list[Problem] = []
    tried: dict[tuple[str, int], str | None] = {}     # one connection per server, not per repository
    for repo in sorted(set(repos)):
        owner, _, name = repo.partition("/")
        if (cache_dir() / "clones" / f"{owner}__{name}.git").is_dir():
            continue                    # cloned once already: only a missing commit is fetched
        try:
            url = clone_url(template, repo)
        except TaskError as exc:
            return [Problem(USAGE, str(exc))]
        parts = urlsplit(url)
        if parts.scheme == "file":
            if not Path(parts.path).is_dir():
                problems.append(Problem(USAGE, f"--repo-url: the mirror of {repo}, {url}, is not a folder; "
                                               "expected a git repository there, e.g. made with "
                                               f"`git clone --mirror https://github.com/{repo}.git {parts.path}`"))
        elif parts.scheme in ("http", "https") and parts.hostname:
            server = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
            reason = tried[server] if server in tried else tried.setdefault(server, _connect(*server))
            if reason is not None:
                problems.append(Problem(INFRA, f"--repo-url: {parts.hostname} (for {repo}, {url}) is not "
                                               f"reachable ({reason}); give the sources with --repos DIR or a "
                                               "mirror with --repo-url 'file:///mirrors/{repo}.git'"))
    return problems
