"""The processes a command leaves behind, and the bash started ahead for the next command.

`Sweep.kill_leftovers` kills every process the command left behind (daemons, setsid'd children,
SIGTERM-ignoring loops, threads whose main thread exited) until a pass over /proc proves none is
left. `WaitingShell` starts one bash ahead for the next command, and only after such a proof.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping

COMMAND_OOM_SCORE_ADJ = 500
# The waiting bash blocks on a pipe until the server writes one byte there, then reads the command from a
# file the server wrote it to (a memfd): bash reads a pipe one byte at a time (a system call per byte: a
# 10 KB command took 2.2 ms more than `true`), a file in blocks (0.5 ms more). Its `read` and `eval` still
# cost about 30 ns a byte, so beyond SPARE_MAX_COMMAND a fresh `bash -c` is quicker (at 100 KB by 1 ms).
SPARE_PRELUDE = ('IFS= read -r -d "" __harness_cmd <&{go}; IFS= read -r -d "" __harness_cmd <&{text}; '
                 'exec {go}<&- {text}<&-; BASH_EXECUTION_STRING=$__harness_cmd; '
                 'eval "unset __harness_cmd; : /bin/bash; $__harness_cmd"')   # `$_` as after bash -c
SPARE_MAX_COMMAND = 32768
SWEEP_SECONDS = 2.0         # passes over /proc before the leftover sweep falls back to kill(-1)


# Debian's bash-static (the same source and version as /bin/bash, linked statically), where the image ships
# it: no dynamic loader and no library to open, so it starts in half the time (3.3 -> 1.9 ms here, where
# every file open is a round trip to a FUSE storage driver). It runs as argv[0] /bin/bash: commands see
# $BASH and $0 as /bin/bash and `ps` names it bash; /proc/$$/exe and `enable -f` (no loadable builtins) differ.
STATIC_BASH = "/opt/harness/bin/bash"


@functools.lru_cache(maxsize=1)
def bash_executable() -> str:
    """The static bash where the image has it, else /bin/bash."""
    return STATIC_BASH if os.access(STATIC_BASH, os.X_OK) else "/bin/bash"


def spawn(script: str, env: Mapping[str, str], cwd: str, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[bytes]:
    """`bash -c script` in its own session and process group, stdin on /dev/null, output on two pipes."""
    proc = subprocess.Popen(["/bin/bash", "-c", script], executable=bash_executable(), cwd=cwd, env=dict(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, close_fds=True, pass_fds=pass_fds)
    try:   # under memory pressure the kernel kills the command's processes before the channel
        with open(f"/proc/{proc.pid}/oom_score_adj", "w") as f:
            f.write(str(COMMAND_OOM_SCORE_ADJ))
    except OSError:
        pass
    return proc


def _stat(path: str) -> list[bytes] | None:
    """The fields of a /proc stat file after the command name (the state first), or None if it is gone."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2:].split()


def _lives(pid: int, state: bytes) -> bool:
    """Whether a thread of process `pid` lives. A leader in state Z may still have threads; threads
    other than the leader leave /proc/<pid>/task as they exit, so any other entry there is one that
    lived when listed (killing it again costs nothing)."""
    if state not in (b"Z", b"X"):
        return True
    try:
        return os.listdir(f"/proc/{pid}/task") not in ([], [str(pid)])
    except OSError:
        return False


class Sweep:
    """The leftover sweep.

    A leftover is any process the server may signal (kill(pid, 0) succeeds: the agent's user, whatever
    a process does to its /proc files) that is not the server, the waiting bash, one of the processes
    found at start, or started from outside the container (ppid 0). It is killed while any of its
    threads lives: a main thread that left with a raw exit() (not exit_group) shows Z while the other
    threads go on. A zombie whose threads are all gone is harmless and is left to its parent or to
    init to reap. A pass over /proc that finds no leftover proves none is left only if it saw the
    whole picture (see `_leftovers`).
    """

    def __init__(self) -> None:
        self.me = os.getpid()
        # Killing "every other process of this user" is only right inside a sandbox; never on a host.
        self.contained = os.path.exists("/.dockerenv") and os.getuid() != 0
        self.initial = self._initial_processes()
        self.protected = {self.me}   # and the waiting bash: children keep their pid until reaped
        self.killed: set[int] = set()   # leftovers killed during the current command
        self.clean = False         # the last sweep found no leftover, and no command ran since
        self.zombies: set[tuple[int, int]] = set()  # (pid, start time) of the agent's zombies the last pass saw

    def _processes(self) -> dict[int, tuple[int, bytes, int]]:
        """pid -> (ppid, state, start time) of every process in /proc."""
        procs = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                fields = _stat(f"/proc/{name}/stat")
                if fields is not None:
                    procs[int(name)] = (int(fields[1]), fields[0], int(fields[19]))
        return procs

    def _initial_processes(self) -> set[tuple[int, int]]:
        """(pid, start time) of pid 1, the container's main process and processes started from outside.

        The main process is pid 1's oldest child; pid 1's other children are orphans of an earlier
        channel's commands (a channel that died), which are leftovers like any other. The start time
        is part of the key: a pid freed and handed to an agent's process is not protected.
        """
        procs = self._processes()
        keep = {(pid, info[2]) for pid, info in procs.items() if pid == 1 or info[0] == 0}
        children = sorted((info[2], pid) for pid, info in procs.items() if info[0] == 1)
        if children:
            start, pid = children[0]
            keep.add((pid, start))
        return keep

    def _leftovers(self) -> tuple[list[int], bool]:
        """The leftovers one pass over /proc finds, and whether the pass was conclusive.

        A process that forks and exits in a chain always lives under a pid newer than the listing of
        /proc; what the listing holds of it is a member that was gone, or a fresh zombie, by the time
        the pass looked. So a pass is conclusive only when no listed process vanished and every zombie
        of the agent's it saw was a zombie in the previous pass too.
        """
        found, conclusive, zombies = [], True, set()
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in self.protected:
                continue
            pid = int(name)
            try:   # before reading its stat file: most processes that are not leftovers are another user's
                os.kill(pid, 0)
            except OSError as exc:
                conclusive = conclusive and exc.errno == errno.EPERM   # another user's; ESRCH: gone
                continue
            fields = _stat(f"/proc/{name}/stat")
            if fields is None:
                conclusive = False
                continue
            ppid, state, start = int(fields[1]), fields[0], int(fields[19])
            if ppid == 0 or (pid, start) in self.initial:
                continue
            if _lives(pid, state):
                found.append(pid)
            else:
                zombies.add((pid, start))
        conclusive = conclusive and zombies <= self.zombies
        self.zombies = zombies
        return found, conclusive

    def kill_leftovers(self) -> bool:
        """SIGKILL every leftover until a pass over /proc finds none; returns whether none is left.

        A process forking in a loop can outrun the passes; after SWEEP_SECONDS the server kills every
        process it may signal at once with kill(-1, SIGKILL), which the kernel makes atomic against
        fork (processes started from outside the container are then killed too).
        """
        self.clean = False
        if not self.contained:
            return False
        deadline, escalated = time.monotonic() + SWEEP_SECONDS, False
        while True:
            found, conclusive = self._leftovers()
            if not found and conclusive:
                self.clean = True
                return True
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)   # the whole thread group, a Z leader's included
                    self.killed.add(pid)
                except OSError:
                    pass
            if time.monotonic() > deadline:
                if escalated:
                    return False
                escalated, deadline = True, time.monotonic() + SWEEP_SECONDS
                try:
                    os.kill(-1, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.002)


def _env_key(env: Mapping[str, str], cwd: str) -> str:
    return json.dumps([cwd, env], sort_keys=True)


class WaitingShell:
    """A bash started ahead of time.

    Starting bash costs a few milliseconds, most of a trivial command's round trip. After each
    answer is sent, a bash for the next command is started and left waiting on a pipe; the command's
    text goes into a memory file it holds, a byte on the pipe wakes it, and it runs the text exactly
    as `bash -c` would (same env, cwd, process group, stdin).
    The waiting bash runs as the agent's user and is dumpable (exec makes it so): any process of that
    user could open /proc/<it>/fd/N and write into its pipe or file (text run by the next command)
    or its stdout (text in the next answer), or ptrace it. So it is started only when the sweep after
    the last command found no leftover (`Sweep.clean`); until the next command no process of the
    agent exists, since only this server starts them. (Processes started from outside the container,
    ppid 0, such as an operator's `docker exec -u agent`, are not the agent's and could reach it.)
    """

    def __init__(self, sweep: Sweep) -> None:
        self.sweep = sweep
        # bash, the write end of its pipe, the file for its command, env key
        self.spare: tuple[subprocess.Popen[bytes], int, int, str] | None = None
        self.wanted: tuple[Mapping[str, str], str] | None = None  # (env, cwd) of the last command

    def want_like(self, env: Mapping[str, str], cwd: str) -> None:
        self.wanted = (env, cwd)

    def start(self) -> None:
        if self.wanted is None or self.spare is not None or not self.sweep.clean:
            return
        env, cwd = self.wanted
        self.wanted = None
        try:
            text = os.memfd_create("command", os.MFD_CLOEXEC)
        except (OSError, AttributeError):    # no memfd here: every command gets a fresh bash
            return
        read_end, write_end = os.pipe()
        try:
            proc = spawn(SPARE_PRELUDE.format(go=read_end, text=text), env, cwd, (read_end, text))
        except OSError:
            os.close(write_end)
            os.close(text)
            return
        finally:
            os.close(read_end)
        self.sweep.protected.add(proc.pid)
        self.spare = (proc, write_end, text, _env_key(env, cwd))

    def take(self, command: str, env: Mapping[str, str], cwd: str) -> subprocess.Popen[bytes] | None:
        """The waiting bash, now running `command`; None when it does not fit (then start a new one)."""
        if self.spare is None:
            return None
        proc, write_end, text, key = self.spare
        self.spare = None
        self.sweep.protected.discard(proc.pid)
        data = command.encode("utf-8", "surrogateescape")
        # SIGPIPE is fatal to the server (see serve.main): if the waiting bash was killed (from outside,
        # or by the OOM killer), the write must fail with EPIPE instead
        pipe_action = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        try:
            if key == _env_key(env, cwd) and len(data) <= SPARE_MAX_COMMAND and b"\0" not in data:
                # at offset 0, which the file's one offset, shared with bash, keeps for bash to read from
                if os.pwrite(text, data, 0) == len(data):
                    os.write(write_end, b"g")
                    return proc
        except OSError:
            pass   # it died while waiting (or the file could not hold the command)
        finally:
            signal.signal(signal.SIGPIPE, pipe_action)
            os.close(write_end)
            os.close(text)
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        return None
