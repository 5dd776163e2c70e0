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


def owner_alive(labels: dict[str, str]) -> bool:
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
    """Remove harness containers and volumes whose owner process is gone; return their names.

    Lists with the low-level API (no inspect per container), so containers that other runs remove
    at the same moment are simply skipped.
    """
    selector = [f"{MANAGED}=true"] + ([f"harness.session={session}"] if session else [])
    removed: list[str] = []
    for container in client.api.containers(all=True, filters={"label": selector}):
        if everything or session or not owner_alive(container.get("Labels") or {}):
            name = (container.get("Names") or [container["Id"]])[0].lstrip("/")
            try:
                client.api.remove_container(container["Id"], force=True, v=True)
                removed.append(name)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if exc.status_code != 409:   # 409: another reaper is already removing it
                    raise
    for volume in client.api.volumes(filters={"label": selector}).get("Volumes") or []:
        if everything or session or not owner_alive(volume.get("Labels") or {}):
            try:
                client.api.remove_volume(volume["Name"], force=True)
                removed.append(volume["Name"])
            except docker.errors.APIError:
                pass
    return removed
