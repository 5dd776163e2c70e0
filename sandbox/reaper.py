"""Finding and removing what the harness left behind.

Every container and volume the harness creates carries `harness.managed=true`, the session, the
host name and the pid of the harness process that owns it. A leftover is one whose owner process is
gone (a crashed or killed run); `reap()` removes those, and with `everything=True` all of them.
"""

from __future__ import annotations

import os
import socket

import docker
import docker.errors

MANAGED = "harness.managed"


def owner_labels(session: str) -> dict[str, str]:
    return {MANAGED: "true", "harness.session": session, "harness.host": socket.gethostname(),
            "harness.pid": str(os.getpid())}


def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get("harness.host") != socket.gethostname():
        return True   # another machine's: not ours to judge
    try:
        pid = int(labels.get("harness.pid", "0"))
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
    """Remove harness containers and volumes whose owner process is gone; return their names."""
    selector = [f"{MANAGED}=true"] + ([f"harness.session={session}"] if session else [])
    removed: list[str] = []
    for container in client.containers.list(all=True, filters={"label": selector}):
        if everything or session or not _owner_alive(container.labels):
            try:
                container.remove(force=True, v=True)
                removed.append(container.name)
            except docker.errors.NotFound:
                pass
    for volume in client.volumes.list(filters={"label": selector}):
        labels = volume.attrs.get("Labels") or {}
        if everything or session or not _owner_alive(labels):
            try:
                volume.remove(force=True)
                removed.append(volume.name)
            except docker.errors.APIError:
                pass
    return removed
