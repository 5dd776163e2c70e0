"""No process of a dead channel server's era sees the next server start (issue 33, section 4).

The agent kills the channel server and leaves a process behind; the `bash` tool restarts the channel.
Before, the new server started among the leftovers: one opened its /proc/<pid>/mem before it made
itself non-dumpable, patched its `kill()`, and was never swept again. Now every restart first kills
every process of the agent's user from outside the container (frozen, listed by the daemon, killed)
and proves none is left (`sandbox.agent_sweep`). Every assertion about what is left lists the
container's processes from outside, with `docker top`.
"""

from __future__ import annotations

import time

import pytest

from harness.config import ToolsConfig
from harness.errors import ChannelLost
from harness.tools.base import ToolContext
from harness.tools.shell.bash import bash_tool
from sandbox.agent_sweep import AgentProcessesSurvive, end_agent_processes
from sandbox.api import AGENT_UID
from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import ChannelClosed, SandboxError
from tests.sandbox.takeover import SURVIVOR, TAKEOVER
from tests.sandbox.test_leftover_survivors import SURVIVOR as RAW_EXIT


def agent_processes(box: DockerSandbox) -> dict[int, tuple[int, str]]:
    """host pid -> (host ppid, command) of every process of the agent's user, listed by the daemon."""
    top = box.container.top(ps_args="-eo pid,ppid,uid,args")
    return {int(pid): (int(ppid), " ".join(args)) for pid, ppid, uid, *args in top["Processes"]
            if int(uid) == AGENT_UID}


def assert_only_the_new_server(box: DockerSandbox) -> None:
    """Every process of the agent is the channel server (started from outside: its parent is none of the
    agent's) or a child of it (the bash started ahead, maybe not yet past its fork)."""
    procs = agent_processes(box)
    servers = [pid for pid, (ppid, args) in procs.items()
               if args == "python3 -I -S -u /opt/harness/channel" and ppid not in procs]
    assert len(servers) == 1, procs
    assert all(pid == servers[0] or ppid == servers[0] for pid, (ppid, _) in procs.items()), procs


def take_over(box: DockerSandbox) -> ToolContext:
    """The attack through the bash tool, which restarts the channel itself."""
    ctx = ToolContext(sandbox=box, session=box.session)
    with pytest.raises(ChannelLost, match="it has been restarted"):
        bash_tool(ToolsConfig()).function(ctx, command=TAKEOVER)
    return ctx


def test_a_survivor_of_a_killed_server_never_sees_the_next_one(sandbox: DockerSandbox) -> None:
    ctx = take_over(sandbox)
    assert sandbox.last_sweep is not None and sandbox.last_sweep.killed >= 1     # the survivor, from outside
    assert_only_the_new_server(sandbox)
    log = sandbox.exec("cat /tmp/survivor.log", timeout=10).stdout.text
    assert "waits for the server" in log and "patched" not in log, log
    # the new server's own sweep works: its kill() is its own
    left = bash_tool(ToolsConfig()).function(ctx, command="setsid sleep 100 > /dev/null 2>&1 < /dev/null &")
    assert left.details["killed_leftovers"] == 1
    assert_only_the_new_server(sandbox)
    assert sandbox._channel is not None and sandbox._channel.guarded


def test_control_without_the_outside_sweep_the_survivor_takes_the_new_server_over(sandbox: DockerSandbox) -> None:
    assert sandbox.runtime is not None
    sandbox.runtime.clear = None          # the restart as it was: the new server starts among the leftovers
    take_over(sandbox)
    log = sandbox.exec("cat /tmp/survivor.log", timeout=30).stdout.text
    assert "patched kill() of the new server" in log, log
    sandbox.exec("setsid sleep 100 > /dev/null 2>&1 < /dev/null &", timeout=30)
    left = [args for args in (a for _, a in agent_processes(sandbox).values())]
    assert any("/tmp/survivor.py" in a for a in left) and "sleep 100" in left, left   # nothing is swept


LEFTOVERS = {
    "a daemon in its own session": "setsid sleep 100 > /dev/null 2>&1 < /dev/null &",
    "a loop that ignores SIGTERM": "(trap '' TERM HUP; while :; do sleep 0.05; done) > /dev/null 2>&1 < /dev/null &",
    "a process that keeps changing its pid": (
        "python3 -c 'import os\nwhile True:\n    if os.fork(): os._exit(0)' > /dev/null 2>&1 < /dev/null &"),
    "a stopped process": "setsid sleep 100 > /dev/null 2>&1 < /dev/null & kill -STOP $!",
    "threads whose main thread exited": "python3 /tmp/raw_exit.py > /dev/null 2>&1 < /dev/null &",
    "the survivor of the takeover": "setsid python3 /tmp/survivor.py $PPID > /dev/null 2>&1 < /dev/null &",
}


@pytest.mark.parametrize("from_host", [True, False], ids=["killed-from-the-host", "killed-by-a-docker-exec"])
def test_every_kind_of_leftover_is_gone_before_the_next_server_starts(sandbox: DockerSandbox, from_host: bool) -> None:
    sandbox.write_file("/tmp/raw_exit.py", RAW_EXIT.encode())
    sandbox.write_file("/tmp/survivor.py", SURVIVOR.encode())
    with pytest.raises(ChannelClosed):
        sandbox.exec(" ".join(f"{cmd};" if not cmd.endswith("&") else cmd for cmd in LEFTOVERS.values())
                     + " sleep 0.5; kill -9 $PPID", timeout=20)
    before = agent_processes(sandbox)
    deadline = time.monotonic() + 20                      # under load a leftover may still be starting
    while len(before) < len(LEFTOVERS) and time.monotonic() < deadline:
        time.sleep(0.2)
        before = agent_processes(sandbox)
    assert len(before) >= len(LEFTOVERS), before          # the probe: they all outlived the server
    assert sandbox._client is not None
    report = end_agent_processes(sandbox._client, sandbox.container.id, from_host=from_host)
    assert report.killed >= len(LEFTOVERS) and report.from_host is from_host
    assert agent_processes(sandbox) == {}
    sandbox.restart_channel()                             # the restart's own sweep finds nothing left
    assert sandbox.last_sweep is not None and sandbox.last_sweep.killed == 0
    assert sandbox.exec("echo back", timeout=10).stdout.text == "back\n"
    assert_only_the_new_server(sandbox)


def test_an_ordinary_restart_works_and_the_next_command_runs(sandbox: DockerSandbox) -> None:
    sandbox.exec("echo kept > kept.txt", timeout=10)
    ctx = ToolContext(sandbox=sandbox, session=sandbox.session)
    with pytest.raises(ChannelLost):
        bash_tool(ToolsConfig()).function(ctx, command="kill -9 $PPID")
    assert sandbox.last_sweep is not None and sandbox.last_sweep.rounds >= 1
    again = bash_tool(ToolsConfig()).function(ctx, command="cat kept.txt")
    assert again.details["exit_code"] == 0 and again.text.endswith("kept")
    assert_only_the_new_server(sandbox)


def test_a_sweep_that_cannot_prove_none_is_left_starts_no_server_and_ends_the_sandbox(sandbox: DockerSandbox) -> None:
    assert sandbox.runtime is not None and sandbox._client is not None
    client, container = sandbox._client, sandbox.container.id
    sandbox.runtime.clear = lambda: end_agent_processes(client, container, rounds=0)   # no round to kill in
    with pytest.raises(ChannelClosed):
        sandbox.exec("setsid sleep 100 > /dev/null 2>&1 < /dev/null & kill -9 $PPID", timeout=20)
    with pytest.raises(SandboxError, match=r"not restarted: 1 process\(es\) of the agent's user still run in "
                                           r"the sandbox after 0 round\(s\).*sleep 100.*the session ends"):
        sandbox.restart_channel()
    with pytest.raises(SandboxError, match="not restarted"):
        sandbox.exec("true", timeout=10)
    with pytest.raises(SandboxError, match="not restarted"):
        sandbox.restart_channel()                         # refused for good, not tried again
    assert [a for _, a in agent_processes(sandbox).values()] == ["sleep 100"]    # no server among them
    with pytest.raises(AgentProcessesSurvive):
        end_agent_processes(client, container, rounds=0)


def test_a_restart_in_a_container_that_stopped_says_so(sandbox: DockerSandbox) -> None:
    sandbox.container.kill()
    with pytest.raises(SandboxError):
        sandbox.exec("true", timeout=10)
    with pytest.raises(SandboxError, match=r"no longer running|is (exited|gone|removing|dead), so no channel can "
                                           r"be started in it; start a new sandbox"):
        sandbox.restart_channel()
