"""Ending every process of the agent in a container from outside it, and proving that none is left.

The channel server runs as the agent's user (it must, to kill what the agent's commands leave behind:
with no capabilities only the same user may signal them), so when it dies its sweep dies with it. A
process of the agent that outlived it could reach the next server before that one makes itself
non-dumpable (open its `/proc/<pid>/mem`, `ptrace` it: same user), patch its `kill()` and go on
unswept. So no new server starts in a container before this module has killed every process of the
agent's user there and shown, from outside, that none is left (`end_agent_processes`):

1. the container is frozen (`docker pause`: the cgroup freezer; nothing in it runs, forks or exits);
2. its processes are listed by the daemon (`docker top`: every pid of its cgroup, with the host's
   view of its user and state), which a frozen container cannot outrun: the listing is the whole
   picture, not a race with a process that forks and exits in a chain;
3. each process of the agent's user is killed with SIGKILL from the host, when this process may
   (the daemon on this machine, the pid in this pid namespace and in the container's cgroup, and the
   right to signal it: root, or the same user); else, once thawed, by a fresh `docker exec` as the
   agent's user running `kill -KILL -1`, which the kernel makes atomic against fork;
4. repeat from 1 until a frozen listing holds no live process of the agent's user. A zombie whose
   threads are all gone cannot run code and does not count; a zombie leader with live threads does.

If a few rounds do not get there, `AgentProcessesSurvive` is raised and no server is started.

The agent's user as the host sees it is found from the container's init, which runs as IDLE_UID:
the difference is the daemon's user-namespace offset (0 without remapping).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass

import docker
import docker.errors

from sandbox.api import AGENT_UID
from sandbox.deployment.docker import IDLE_UID
from sandbox.errors import SandboxError

ROUNDS = 4                 # freeze, list, kill: a fifth listing that still finds one gives up
KILL_EXEC = ["/bin/sh", "-c", "kill -KILL -1"]   # every process of its user but itself, atomically
KILL_EXEC_SECONDS = 10.0
PS_ARGS = "-eo pid,uid,nlwp,stat,args"


class AgentProcessesSurvive(SandboxError):
    """Processes of the agent's user still run in the container after it was swept from outside."""


@dataclass(frozen=True)
class ContainerProcess:
    """One process of a container, as the host sees it (`docker top`)."""

    host_pid: int
    uid: int          # the host's view: the container's uid plus the daemon's user-namespace offset
    threads: int
    state: str
    command: str

    @property
    def alive(self) -> bool:
        """Whether it can still run code: anything but a zombie whose other threads are gone too."""
        return not (self.state.startswith(("Z", "X")) and self.threads <= 1)

    def __str__(self) -> str:
        return f"pid {self.host_pid} ({self.state}, {self.threads} thread(s)): {self.command[:120]}"


@dataclass(frozen=True)
class SweepReport:
    """What `end_agent_processes` did: how many processes it killed, in how many rounds, and how."""

    killed: int
    rounds: int
    from_host: bool     # killed by this process's own kill(); False: by a `docker exec` as the agent


def container_processes(client: docker.DockerClient, container_id: str) -> list[ContainerProcess]:
    """Every process of the container, listed by the daemon.

    Raises:
        SandboxError: the daemon did not list them (the container is gone, or `ps` failed).
    """
    try:
        top = client.api.top(container_id, ps_args=PS_ARGS)
    except docker.errors.APIError as exc:
        raise SandboxError(f"the daemon could not list the processes of container {container_id[:12]}: "
                           f"{exc}") from exc
    titles = [t.upper() for t in top.get("Titles") or []]
    want = ["PID", "UID", "NLWP", "STAT"]
    if titles[:4] != want:
        raise SandboxError(f"`docker top {container_id[:12]} {PS_ARGS}` gave the columns {titles}; expected "
                           f"{want + ['COMMAND']}")
    found = []
    for row in top.get("Processes") or []:
        pid, uid, threads, state, *command = row
        found.append(ContainerProcess(int(pid), int(uid), int(threads), state, " ".join(command)))
    return found


@contextlib.contextmanager
def frozen(client: docker.DockerClient, container_id: str) -> Iterator[None]:
    """The container paused (nothing in it runs, forks or exits) for the block, thawed after it.

    Raises:
        AgentProcessesSurvive: the daemon cannot pause it (no freezer here), so no listing is conclusive.
    """
    try:
        client.api.pause(container_id)
    except docker.errors.APIError as exc:
        state = _state(client, container_id)
        if state != "running":
            raise SandboxError(f"the sandbox's container {container_id[:12]} is {state}, so no channel can be "
                               "started in it; start a new sandbox") from exc
        raise AgentProcessesSurvive(
            f"the daemon could not pause container {container_id[:12]} ({exc}), so the harness cannot prove "
            "that no process of the agent outlived the channel server; a new server is not started there "
            "and the sandbox is not used again (run on a daemon that can pause containers: cgroup freezer)"
        ) from exc
    try:
        yield
    finally:
        client.api.unpause(container_id)


def _state(client: docker.DockerClient, container_id: str) -> str:
    """The container's state as the daemon says it ("running", "exited", ...), "gone" once removed."""
    try:
        return str(client.api.inspect_container(container_id)["State"]["Status"])
    except docker.errors.NotFound:
        return "gone"


def _agent_uid_on_host(client: docker.DockerClient, container_id: str, procs: list[ContainerProcess]) -> int:
    """The agent's uid as the host's `ps` shows it: AGENT_UID moved by the offset that init's user shows."""
    init_pid = int(client.api.inspect_container(container_id)["State"]["Pid"])
    for proc in procs:
        if proc.host_pid == init_pid:
            return proc.uid - IDLE_UID + AGENT_UID
    raise SandboxError(f"the container's init (host pid {init_pid}) is not among its processes "
                       f"{[str(p) for p in procs]}; it stopped")


def _ours_to_kill(proc: ContainerProcess, container_id: str) -> bool:
    """Whether `proc.host_pid` names, in this process's pid namespace, that very process of the container
    (frozen, so it cannot exit and hand its pid on before the kill)."""
    try:
        with open(f"/proc/{proc.host_pid}/cgroup", encoding="ascii", errors="replace") as f:
            return container_id in f.read()
    except OSError:
        return False


def _kill_from_host(procs: list[ContainerProcess], container_id: str) -> bool:
    """SIGKILL each of `procs` from here; False when this process cannot (another machine's or namespace's
    pids, or no right to signal them), and then it killed none it could not tell apart."""
    if not all(_ours_to_kill(p, container_id) for p in procs):
        return False
    for proc in procs:
        try:
            os.kill(proc.host_pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        except PermissionError:
            return False
    return True


def _kill_as_agent(client: docker.DockerClient, container_id: str) -> None:
    """`kill -KILL -1` in a fresh `docker exec` as the agent's user: every process of that user dies but the
    killer (the kernel makes kill(-1) atomic against fork). Waits for it, up to KILL_EXEC_SECONDS."""
    exec_id = client.api.exec_create(container_id, KILL_EXEC, user=f"{AGENT_UID}:{AGENT_UID}", workdir="/",
                                     environment={"PATH": "/usr/bin:/bin"}, stdout=False, stderr=False)["Id"]
    client.api.exec_start(exec_id, detach=True)
    deadline = time.monotonic() + KILL_EXEC_SECONDS
    while client.api.exec_inspect(exec_id).get("Running") and time.monotonic() < deadline:
        time.sleep(0.01)


def end_agent_processes(client: docker.DockerClient, container_id: str, *, from_host: bool = True,
                        rounds: int = ROUNDS) -> SweepReport:
    """Kill every process of the agent's user in the container, from outside, and prove none is left (see
    the module's docstring). `from_host` False: never kill from here, only by `docker exec` as the agent;
    `rounds`: of freezing, listing and killing, before giving up.

    Raises:
        AgentProcessesSurvive: some are still alive after `rounds` rounds, or the container cannot be paused.
        SandboxError: the daemon failed otherwise (the container stopped or went, an unpause was refused).
    """
    try:
        return _sweep(client, container_id, from_host, rounds)
    except docker.errors.APIError as exc:
        raise SandboxError(f"the sweep of the agent's processes in container {container_id[:12]} failed: {exc}; "
                           "no channel server is started there") from exc


def _sweep(client: docker.DockerClient, container_id: str, from_host: bool, rounds: int) -> SweepReport:
    killed, by_host, left = 0, from_host, []
    for number in range(1, rounds + 2):
        with frozen(client, container_id):
            procs = container_processes(client, container_id)
            agent = _agent_uid_on_host(client, container_id, procs)
            left = [p for p in procs if p.uid == agent and p.alive]
            if not left:
                return SweepReport(killed, number, by_host)
            if number > rounds:
                break
            by_host = by_host and _kill_from_host(left, container_id)
        if not by_host:
            _kill_as_agent(client, container_id)
        killed += len(left)
        time.sleep(0.01 * number)   # killed while frozen: they die as the container thaws; init reaps them
    raise AgentProcessesSurvive(
        f"{len(left)} process(es) of the agent's user still run in the sandbox after {rounds} round(s) of "
        f"killing them from outside: {'; '.join(str(p) for p in left[:5])}. A new channel server is not "
        "started among them (one could take it over), so this sandbox is not used again: the session ends")
