"""Finding and removing what the harness left behind.

Every container the harness creates carries `harness.managed=true`, the session, the host name and
the pid of the harness process that owns it. A leftover is one whose owner process is gone (a crashed
or killed run); `reap()` removes those, and with `everything=True` all of them. `remove_containers()`
is the one removal by label; the evaluation backends use it for the containers of one run. The host
folders of channel links (`sandbox/channel.py`), named after their owner's pid, go the same way.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors

MANAGED = "harness.managed"


def owner_labels(session: str) -> dict[str, str]:
    return {MANAGED: "true", "harness.session": session, "harness.host": socket.gethostname(),
            "harness.pid": str(os.getpid())}


def owner_alive(labels: dict[str, str]) -> bool:
    if labels.get("harness.host") != socket.gethostname():
        return True   # another machine's: not ours to judge
    return _pid_alive(labels.get("harness.pid", "0"))


def _pid_alive(text: str) -> bool:
    try:
        pid = int(text)
    except ValueError:
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap(client: docker.DockerClient, *, everything: bool = False, session: str | None = None) -> list[str]:
    """Remove harness containers whose owner process is gone (all of them with `everything`, all of
    `session`'s with `session`); return their names."""
    selector = [f"{MANAGED}=true"] + ([f"harness.session={session}"] if session else [])
    if everything or session:
        removed = remove_containers(client, selector)
    else:
        removed = remove_containers(client, selector, keep=owner_alive)
    if session is None:
        reap_link_folders(everything=everything)
    return removed


def links_root() -> Path:
    """The host folder holding this user's channel link folders, one per running sandbox, each named
    `<owner pid>-<name>`."""
    return Path(tempfile.gettempdir()) / f"harness-links-{os.getuid()}"


def reap_link_folders(*, everything: bool = False) -> None:
    """Remove the link folders whose owner process is gone (all of them with `everything`)."""
    root = links_root()
    if root.is_symlink() or not root.is_dir():
        return
    for folder in root.iterdir():
        if not everything and _pid_alive(folder.name.split("-", 1)[0]):
            continue
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)


def remove_containers(client: docker.DockerClient, labels: list[str],
                      keep: Callable[[dict[str, str]], bool] | None = None) -> list[str]:
    """Remove the containers (running or not, with their anonymous volumes) carrying every label in
    `labels` ("key=value"), except those whose labels `keep` accepts; return their names.

    Lists with the low-level API, because `containers.list()` inspects each container afterwards and
    fails when one is removed in between; containers that others remove at the same moment are skipped.
    """
    removed: list[str] = []
    for container in client.api.containers(all=True, filters={"label": labels}):
        if keep is not None and keep(container.get("Labels") or {}):
            continue
        try:
            client.api.remove_container(container["Id"], force=True, v=True)
            removed.append((container.get("Names") or [container["Id"]])[0].lstrip("/"))
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:   # 409: another reaper is already removing it
                raise
    return removed
