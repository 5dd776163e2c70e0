"""Finding and removing what the harness left behind.

Every container the harness creates carries `harness.managed=true`, the session, and its owner: the
host name, the boot id, the pid of the harness process that owns it and that pid's start time (a pid
the kernel gave to another process since is not the owner). A container normally ends with its owner
(`sandbox/deployment/lifeline.py`); a leftover is one whose owner is gone all the same (created by a
dying process before its lifeline was attached, or by an older harness); `reap()` removes those,
`reap_all()` every container but those of live owners (which it names), and with `force` those too.
`remove_containers()` is the one removal by label; the evaluation backends use it for the containers
of one run. The host folders of channel links (`sandbox/host_channel.py`), named after their owner's pid, go the
same way.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

MANAGED = "harness.managed"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class Spared:
    """Containers `reap(everything=True)` kept because their owner process is alive on this machine."""

    pid: int
    command: str                 # the owner's command line, as /proc has it ("" when unreadable)
    containers: tuple[str, ...]


@dataclass(frozen=True)
class Reaped:
    removed: list[str] = field(default_factory=list)
    spared: list[Spared] = field(default_factory=list)


def owner_labels(session: str) -> dict[str, str]:
    """The labels naming this process as a container's owner: host name, boot id, pid and the pid's start
    time (so that another process given the same pid later is not taken for the owner)."""
    pid = os.getpid()
    return {MANAGED: "true", "harness.session": session, "harness.host": socket.gethostname(),
            "harness.boot": boot_id(), "harness.pid": str(pid), "harness.pid_start": process_start(pid)}


def boot_id() -> str:
    """This boot of this machine's kernel ("" where the kernel does not say)."""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""


def process_start(pid: int) -> str:
    """When process `pid` started, in clock ticks after boot (field 22 of /proc/PID/stat); "" when there
    is no such process or no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # the command name (field 2) is in parentheses and may hold spaces or parentheses itself
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else ""


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the process the labels name as a container's owner is still running. A container of another
    machine is never judged here (True); one of an earlier boot of this machine, or whose pid is gone or
    now belongs to a process started at another time, is not alive."""
    if labels.get("harness.host") != socket.gethostname():
        return True   # another machine's: not ours to judge
    boot = labels.get("harness.boot", "")
    if boot and boot_id() and boot != boot_id():
        return False
    if not _pid_alive(labels.get("harness.pid", "0")):
        return False
    started = labels.get("harness.pid_start", "")
    now = process_start(int(labels["harness.pid"]))
    return not (started and now and started != now)


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
    `session`'s with `session`); return their names. See `reap_all` for everything but live owners'."""
    selector = [f"{MANAGED}=true"] + ([f"harness.session={session}"] if session else [])
    if everything or session:
        removed = remove_containers(client, selector)
    else:
        removed = remove_containers(client, selector, keep=owner_alive)
    if session is None:
        reap_link_folders(everything=everything)
    return removed


def reap_all(client: docker.DockerClient, *, force: bool = False, only: tuple[str, ...] = ()) -> Reaped:
    """Remove every harness container but those whose owner process is alive on this machine (those too with
    `force`), and say which were spared, by owner; `only`: just the containers carrying these labels too
    ("key=value"). Containers of other machines are removed: their owner cannot be judged here."""
    selector = [f"{MANAGED}=true", *only]
    spared: dict[int, list[str]] = {}

    def keep(labels: dict[str, str], name: str) -> bool:
        if force or labels.get("harness.host") != socket.gethostname() or not owner_alive(labels):
            return False
        spared.setdefault(int(labels["harness.pid"]), []).append(name)
        return True

    removed = remove_containers(client, selector, keep_named=keep)
    if not only:
        reap_link_folders(everything=force)
    return Reaped(removed=removed, spared=[Spared(pid, _command_line(pid), tuple(names))
                                           for pid, names in sorted(spared.items())])


def _command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")


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
                      keep: Callable[[dict[str, str]], bool] | None = None, *,
                      keep_named: Callable[[dict[str, str], str], bool] | None = None) -> list[str]:
    """Remove the containers (running or not, with their anonymous volumes) carrying every label in
    `labels` ("key=value"), except those whose labels `keep` accepts (or whose labels and name
    `keep_named` accepts); return their names.

    Lists with the low-level API, because `containers.list()` inspects each container afterwards and
    fails when one is removed in between; containers that others remove at the same moment are skipped.
    """
    removed: list[str] = []
    for container in client.api.containers(all=True, filters={"label": labels}):
        found = container.get("Labels") or {}
        name = (container.get("Names") or [container["Id"]])[0].lstrip("/")
        if (keep is not None and keep(found)) or (keep_named is not None and keep_named(found, name)):
            continue
        try:
            client.api.remove_container(container["Id"], force=True, v=True)
            removed.append(name)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:   # 409: another reaper is already removing it
                raise
    return removed
