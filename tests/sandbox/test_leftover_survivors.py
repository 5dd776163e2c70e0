"""Leftovers that try to outlive the sweep after a command, and what one could do if it did.

A process whose main thread leaves with a raw exit() (SYS_exit, not exit_group) shows state Z while
its other threads run on. It used to survive every later command, and from there could open
/proc/<bash>/fd/N of the bash started ahead for the next command and type into it (text the next
command then ran) or into its stdout (text in the next answer). The sweep now looks at every thread
of every process the channel may signal, and the bash for the next command starts only once a pass
has found none left.
"""

from __future__ import annotations

import json
import time

from sandbox.docker_sandbox import DockerSandbox

# Every thread of every process of the agent's user but the probe and its ancestors (the command's
# shell, the channel server): [pid, tid, state].
TASKS = """
import json, os
skip, pid = set(), os.getpid()
while pid > 1:
    skip.add(pid)
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
found = []
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) in skip:
        continue
    try:
        uid = next(line.split()[1] for line in open(f"/proc/{name}/status") if line.startswith("Uid:"))
        tids = os.listdir(f"/proc/{name}/task")
    except OSError:
        continue
    for tid in tids if uid == str(os.getuid()) else ():
        try:
            stat = open(f"/proc/{name}/task/{tid}/stat").read()
        except OSError:
            continue
        found.append([int(name), int(tid), stat.rsplit(")", 1)[1].split()[0]])
print(json.dumps(sorted(found)))
"""

# The main thread leaves with SYS_exit (60 on x86_64), the other goes on appending to /tmp/ticks.
SURVIVOR = """
import ctypes, threading, time
def tick():
    while True:
        with open("/tmp/ticks", "a") as f:
            f.write("t\\n")
        time.sleep(0.01)
threading.Thread(target=tick).start()
time.sleep(0.05)
ctypes.CDLL(None).syscall(60, 0)
"""

# Same trick; the thread writes a command into every pipe of every bash it can open, once each.
TYPER = """
import ctypes, os, threading, time
def type_into_every_bash():
    done = set()
    while True:
        for pid in os.listdir("/proc"):
            try:
                if not pid.isdigit() or open(f"/proc/{pid}/comm").read() != "bash\\n":
                    continue
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                path = f"/proc/{pid}/fd/{fd}"
                try:
                    if (pid, fd) in done or not os.readlink(path).startswith("pipe:"):
                        continue
                    w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                    os.write(w, b"touch /tmp/pwned\\n")
                    os.close(w)
                except OSError:
                    continue
                done.add((pid, fd))
                with open("/tmp/typed", "a") as log:
                    log.write(f"{pid}/{fd}\\n")
        time.sleep(0.005)
threading.Thread(target=type_into_every_bash).start()
time.sleep(0.05)
ctypes.CDLL(None).syscall(60, 0)
"""


def _tasks_line(text: str) -> list[list]:
    return json.loads(next(line for line in text.splitlines() if line.startswith("[")))


def test_a_thread_whose_main_thread_exited_is_killed_with_the_command(sandbox: DockerSandbox) -> None:
    sandbox.write_file("/tmp/tasks.py", TASKS.encode())
    sandbox.write_file("/tmp/survivor.py", SURVIVOR.encode())
    started = sandbox.exec("python3 /tmp/survivor.py & echo $!; sleep 0.3; python3 /tmp/tasks.py; "
                           "a=$(wc -l </tmp/ticks); sleep 0.2; echo $a $(wc -l </tmp/ticks)", timeout=20)
    pid_line, tasks_line, ticks_line = started.stdout.text.splitlines()
    pid, tasks = int(pid_line), _tasks_line(tasks_line)
    # positive control: while the command runs, the leader is a zombie and its thread keeps working
    assert [pid, pid, "Z"] in tasks and any(t[0] == pid and t[1] != pid and t[2] in "RS" for t in tasks), tasks
    before, after = map(int, ticks_line.split())
    assert after > before, ticks_line
    assert started.exit_code == 0

    check = sandbox.exec("python3 /tmp/tasks.py; a=$(wc -l </tmp/ticks); sleep 0.3; echo $a $(wc -l </tmp/ticks)",
                         timeout=20)
    tasks_line, ticks_line = check.stdout.text.splitlines()
    assert _tasks_line(tasks_line) == []          # no process of the agent but the channel and this command
    before, after = map(int, ticks_line.split())
    assert before == after, ticks_line            # the thread no longer writes
    assert started.killed_leftovers == 1


def test_a_non_dumpable_leftover_is_killed_though_its_proc_files_belong_to_root(sandbox: DockerSandbox) -> None:
    sandbox.write_file("/tmp/tasks.py", TASKS.encode())
    started = sandbox.exec("python3 -c 'import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); "
                           "time.sleep(1000)' & sleep 0.3; stat -c %U /proc/$!/status", timeout=20)
    assert started.stdout.text == "root\n"        # positive control: its /proc files no longer name the agent
    assert started.killed_leftovers == 1
    assert _tasks_line(sandbox.exec("python3 /tmp/tasks.py", timeout=20).stdout.text) == []


def test_a_leftover_cannot_type_into_the_shell_started_for_the_next_command(sandbox: DockerSandbox) -> None:
    sandbox.write_file("/tmp/typer.py", TYPER.encode())
    first = sandbox.exec("python3 /tmp/typer.py & sleep 0.2; "
                         "sleep 1 | bash -c 'IFS= read -r line; eval \"$line\"'; "
                         "test -e /tmp/pwned && echo control-typed; rm -f /tmp/pwned", timeout=20)
    # positive control: a bash reading a pipe, while the command runs, does run what the typer writes
    assert "control-typed\n" in first.stdout.text, first
    time.sleep(0.5)   # time enough, were it alive, to find the bash waiting for the next command
    second = sandbox.exec("test -e /tmp/pwned && echo present || echo absent", timeout=20)
    assert second.stdout.text == "absent\n" and second.stderr.text == ""   # nothing ran, nothing slipped in
    third = sandbox.exec("test -e /tmp/pwned && echo present || echo absent; sort -u /tmp/typed | wc -l",
                         timeout=20)
    assert third.stdout.text.splitlines()[0] == "absent"
    assert int(third.stdout.text.splitlines()[1]) >= 1   # it did type, but only into the first command's shells
    assert first.killed_leftovers == 1


# A process that forks and exits in a chain: at any moment one member lives, under a new pid.
HOPPER = """
import os
hops = 0
while True:
    if os.fork():
        os._exit(0)
    hops += 1
    if hops % 50 == 1:
        with open("/tmp/hops", "a") as f:
            f.write("h\\n")
"""


def _assert_no_agent_task_and_no_hop(sandbox: DockerSandbox) -> None:
    """The next command lists no task of the agent, and the hop counter stands still while it runs."""
    check = sandbox.exec("python3 /tmp/tasks.py; a=$(wc -l </tmp/hops); sleep 0.3; echo $a $(wc -l </tmp/hops)",
                         timeout=20)
    tasks_line, hops_line = check.stdout.text.splitlines()
    assert _tasks_line(tasks_line) == []
    before, after = map(int, hops_line.split())
    assert before == after, hops_line


def test_a_process_that_keeps_changing_its_pid_is_killed_with_the_command(sandbox: DockerSandbox) -> None:
    sandbox.write_file("/tmp/tasks.py", TASKS.encode())
    sandbox.write_file("/tmp/hopper.py", HOPPER.encode())
    for _ in range(5):   # each round races the sweep anew
        started = sandbox.exec("python3 /tmp/hopper.py & sleep 0.3; a=$(wc -l </tmp/hops); sleep 0.2; "
                               "echo $a $(wc -l </tmp/hops)", timeout=20)
        before, after = map(int, started.stdout.text.split())
        assert after > before, started               # positive control: it hops while the command runs
        _assert_no_agent_task_and_no_hop(sandbox)
        assert started.killed_leftovers >= 1


def test_a_storm_of_such_processes_is_killed_before_the_answer(sandbox: DockerSandbox) -> None:
    # Ten chains outrun the passes over /proc; the channel then kills every process it may signal at once.
    sandbox.write_file("/tmp/tasks.py", TASKS.encode())
    sandbox.write_file("/tmp/hopper.py", HOPPER.encode())
    started = sandbox.exec("for i in $(seq 10); do python3 /tmp/hopper.py >/dev/null 2>&1 & done; sleep 1; "
                           "a=$(wc -l </tmp/hops); sleep 0.2; echo $a $(wc -l </tmp/hops)", timeout=30)
    before, after = map(int, started.stdout.text.split())
    assert after > before, started                   # positive control: they hop while the command runs
    _assert_no_agent_task_and_no_hop(sandbox)
    assert sandbox.exec("echo in sync", timeout=10).stdout.text == "in sync\n"   # the channel lived through it


def test_a_waiting_shell_killed_from_outside_costs_only_a_fresh_shell(sandbox: DockerSandbox) -> None:
    assert sandbox.exec("true", timeout=10).exit_code == 0
    time.sleep(0.3)   # the bash for the next command is waiting
    found = sandbox.container.exec_run(["pgrep", "-f", "__harness_cmd"], user="agent")
    assert found.exit_code == 0 and len(found.output.split()) == 1   # positive control: there is one
    killed = sandbox.container.exec_run(["pkill", "-KILL", "-f", "__harness_cmd"], user="agent")
    assert killed.exit_code == 0
    assert sandbox.exec("echo still here", timeout=10).stdout.text == "still here\n"
