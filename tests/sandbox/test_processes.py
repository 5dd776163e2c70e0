"""After every command, nothing the command started is left running: only the channel survives.

A command runs in its own process group; on timeout the group gets SIGTERM, then SIGKILL; after
it returns (timed out or not), every other process of the agent user is killed, which catches
daemons that left the group with setsid or a double fork.
"""

from __future__ import annotations

import time

from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import ChannelClosed
from tests.sandbox.conftest import processes

# init, the container's main process (`cat` reading its lifeline), the channel
BASELINE = {"docker-init", "cat", "python3"}


def _names(box: DockerSandbox) -> list[str]:
    return sorted(line.split()[1] for line in processes(box))


def _assert_only_baseline(box: DockerSandbox) -> None:
    procs = processes(box)
    assert sorted(line.split()[1] for line in procs) == ["cat", "docker-init", "python3"], procs
    assert any(p.endswith(" cat cat") for p in procs), procs


def test_only_init_the_main_process_and_the_channel_run_between_commands(sandbox: DockerSandbox) -> None:
    _assert_only_baseline(sandbox)


def test_sleep_infinity_is_killed_at_the_timeout(sandbox: DockerSandbox) -> None:
    started = time.monotonic()
    result = sandbox.exec("echo before; sleep infinity", timeout=1)
    assert result.timed_out and result.exit_code == 128 + 15      # SIGTERM ended it
    assert result.stdout.text == "before\n"                        # partial output is kept
    assert time.monotonic() - started < 30                         # ended by the timeout, not left running
    _assert_only_baseline(sandbox)


def test_a_loop_that_ignores_sigterm_is_killed_after_the_grace_period(sandbox: DockerSandbox) -> None:
    result = sandbox.exec("trap '' TERM; while true; do sleep 0.1; done", timeout=1)
    assert result.timed_out and result.exit_code == 128 + 9        # needed SIGKILL
    assert 1 <= result.duration < 30                               # after the timeout, then not left running
    _assert_only_baseline(sandbox)


def test_background_children_are_gone_after_a_normal_exit(sandbox: DockerSandbox) -> None:
    result = sandbox.exec("sleep 1000 & nohup sleep 1001 >/dev/null 2>&1 & disown; echo started", timeout=10)
    assert result.exit_code == 0 and not result.timed_out and result.stdout.text == "started\n"
    assert result.killed_leftovers == 2
    assert result.duration < 8            # the leftovers did not hold the answer until the 10 s timeout
    _assert_only_baseline(sandbox)


def test_setsid_and_double_forked_daemons_are_gone_after_a_normal_exit(sandbox: DockerSandbox) -> None:
    daemon = ("import os, sys, time\n"
              "if os.fork(): sys.exit(0)\n"
              "os.setsid()\n"
              "if os.fork(): sys.exit(0)\n"
              "os.closerange(0, 3)\n"
              "time.sleep(1000)\n")
    sandbox.write_file("daemon.py", daemon.encode())
    result = sandbox.exec("python3 daemon.py; setsid sleep 1002 & setsid -f sh -c 'sleep 1003 &'; echo ok",
                          timeout=10)
    assert result.exit_code == 0 and result.stdout.text == "ok\n"
    assert result.killed_leftovers >= 3
    _assert_only_baseline(sandbox)


def test_daemons_started_by_a_command_that_times_out_are_gone(sandbox: DockerSandbox) -> None:
    result = sandbox.exec("setsid sleep 1004 & (trap '' TERM; sleep 1005) & sleep infinity", timeout=1)
    assert result.timed_out
    _assert_only_baseline(sandbox)


def test_a_daemon_holding_the_output_pipe_does_not_hold_the_answer(sandbox: DockerSandbox) -> None:
    result = sandbox.exec("setsid sh -c 'while true; do echo tick; sleep 0.05; done' & echo main", timeout=30)
    assert not result.timed_out and result.exit_code == 0
    assert result.stdout.text.startswith("main\n") or "main\n" in result.stdout.text
    assert result.duration < 20           # the daemon did not hold the answer until the 30 s timeout
    _assert_only_baseline(sandbox)


def test_commands_reading_stdin_get_end_of_file_at_once(sandbox: DockerSandbox) -> None:
    started = time.monotonic()
    cat = sandbox.exec("cat; echo rc=$?", timeout=20)
    read = sandbox.exec("read line; echo rc=$?", timeout=20)
    py = sandbox.exec("python3 -c 'input()'", timeout=20)
    assert cat.stdout.text == "rc=0\n" and not cat.timed_out
    assert read.stdout.text == "rc=1\n" and not read.timed_out
    assert py.exit_code == 1 and "EOFError" in py.stderr.text
    assert time.monotonic() - started < 40                         # no read waited for its 20 s timeout


def test_exit_codes_and_signals_are_reported(sandbox: DockerSandbox) -> None:
    assert sandbox.exec("exit 3", timeout=10).exit_code == 3
    assert sandbox.exec("kill -SEGV $$", timeout=10).exit_code == 128 + 11
    assert sandbox.exec("true", timeout=10).exit_code == 0


def test_the_agent_cannot_stop_the_container_by_signalling_init_or_the_main_process(sandbox: DockerSandbox) -> None:
    result = sandbox.exec("kill -TERM 1; kill -KILL 1; pkill -x cat; echo done", timeout=10)
    assert "kill: (1) - Operation not permitted" in result.stderr.text
    assert "pkill: killing pid" in result.stderr.text and "Operation not permitted" in result.stderr.text
    assert result.stdout.text == "done\n"
    sandbox.container.reload()
    assert sandbox.container.status == "running"
    _assert_only_baseline(sandbox)


def test_killing_every_process_of_the_agent_loses_only_the_channel(sandbox: DockerSandbox) -> None:
    sandbox.exec("echo kept > kept.txt", timeout=10)
    try:
        sandbox.exec("kill -KILL -1", timeout=10)
    except ChannelClosed:
        pass                                           # the channel was the agent's too
    sandbox.restart_channel()
    assert sandbox.exec("cat kept.txt", timeout=10).stdout.text == "kept\n"
    _assert_only_baseline(sandbox)


def test_a_command_that_closes_its_output_is_still_waited_for_and_timed(sandbox: DockerSandbox) -> None:
    finished = sandbox.exec("echo early; exec >&- 2>&-; sleep 0.5; exit 4", timeout=10)
    assert finished.exit_code == 4 and not finished.timed_out and finished.stdout.text == "early\n"
    assert finished.duration >= 0.5
    hung = sandbox.exec("exec >&- 2>&-; sleep 100", timeout=1)
    assert hung.timed_out and hung.exit_code == 128 + 15
    _assert_only_baseline(sandbox)
