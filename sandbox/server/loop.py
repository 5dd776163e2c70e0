"""The `exec` operation: start the command, read both its pipes until they close (the read loop),
enforce the timeout (SIGTERM to the group, SIGKILL after the grace period), then sweep leftovers."""

from __future__ import annotations

import fcntl
import functools
import os
import re
import selectors
import signal
import subprocess
import time

from sandbox._protocol import ExecAnswer, ExecRequest, SpawnFailed
from sandbox.server.capture import Capture
from sandbox.server.processes import Sweep, WaitingShell, spawn

CHUNK = 1 << 20
PIPE_SIZE = 1 << 20    # the pipes grown to this (Linux's default pipe-max-size) so each read takes a large piece
# A command that has printed more than HOT bytes and whose last read was short (we read faster than it
# writes) is left NAP seconds to fill its pipe before the next read. Woken at every write instead, the
# loop took 13 KB a read on average, 80,000 reads for 1 GiB, and spent 1.5 s of CPU on it (1.0 s
# with the naps), on the one CPU the sandbox shares with the command. A NAP's worth of output (under
# 1 MB at memory speed) fits in the grown pipe, so the command never waits for us; small outputs
# never nap.
HOT = 1 << 20
NAP = 0.0005
# Output folders made once: checking before every command (two stats and a mkdir) was 0.2 ms of a trivial
# command's 2 ms. One the agent removes later is made again when an output is next saved (Capture._save).
_MADE: set[str] = set()


def run_exec_request(req: ExecRequest, number: int, sweep: Sweep, shell: WaitingShell) -> ExecAnswer | SpawnFailed:
    """Run `req.command` (the session's command `number`) and answer with its bounded output."""
    out_dir = req.output_dir
    if out_dir and out_dir not in _MADE:
        try:
            os.makedirs(out_dir, exist_ok=True)
            _MADE.add(out_dir)
        except OSError:
            out_dir = None   # the agent replaced it with a file: run the command without saving
    error_re = re.compile(req.error_pattern.encode(), re.MULTILINE) if req.error_pattern else None
    caps = [Capture(req.head_bytes, req.tail_bytes, f"{out_dir}/cmd-{number}.{name}.txt" if out_dir else None,
                    req.save_bytes, error_re, req.error_lines, (int(req.save_over_bytes), int(req.save_over_lines)))
            for name in ("stdout", "stderr")]
    env, cwd = req.env or {}, req.cwd
    sweep.killed = set()
    sweep.clean = False
    started = time.monotonic()
    try:
        proc = shell.take(req.command, env, cwd) or spawn(req.command, env, cwd)
    except OSError as exc:
        for c in caps:
            c.finish(False)
        return SpawnFailed(f"{type(exc).__name__}: {exc}")
    shell.want_like(env, cwd)
    try:
        timed_out = _pump(proc, caps, float(req.timeout), float(req.grace), sweep)
    finally:
        if proc.poll() is None:   # only when reading failed: never leave the command running
            _terminate_group(proc, 0, sweep)
    code = proc.wait()
    duration = time.monotonic() - started
    sweep.kill_leftovers()
    return ExecAnswer(exit_code=128 - code if code < 0 else code, duration=duration, timed_out=timed_out,
                      killed_leftovers=len(sweep.killed), stdout=caps[0].finish(req.save),
                      stderr=caps[1].finish(req.save))


@functools.lru_cache(maxsize=1)
def _read_buffer() -> bytearray:
    """The one buffer every read of every command goes into (made once: 1 MiB zeroed costs page faults)."""
    return bytearray(CHUNK)


def _pidfd(pid: int) -> int | None:
    """A file descriptor that becomes readable when `pid` exits (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _pump(proc: subprocess.Popen[bytes], caps: list[Capture], timeout: float, grace: float, sweep: Sweep) -> bool:
    """Read both pipes until they close; returns whether the command timed out. In four steps:

    1. watch both pipes (grown, non-blocking) and bash's exit (a pidfd) on one selector (`_watch`);
    2. read until the pipes close, ending the command at the timeout (`_read_loop`);
    3. the pipes closed a moment before bash exits: wait for the exit itself on the pidfd (woken at
       once), not with Popen.wait(timeout), whose sleeps double from 0.5 ms and cost milliseconds;
    4. close the selector and the pipes; a command still running then is waited for up to the
       timeout, and ended at it.
    """
    assert proc.stdout is not None and proc.stderr is not None
    sel, grown, pidfd = _watch(proc, caps)
    deadline = time.monotonic() + timeout
    timed_out, watching = _read_loop(proc, sel, grown, pidfd is not None, deadline, grace, sweep)
    if not timed_out and watching and proc.poll() is None:
        sel.select(max(0.0, deadline - time.monotonic()))
    sel.close()
    if pidfd is not None:
        os.close(pidfd)
    proc.stdout.close()
    proc.stderr.close()
    if not timed_out and proc.poll() is None:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _terminate_group(proc, grace, sweep)
    return timed_out


def _watch(proc: subprocess.Popen[bytes], caps: list[Capture]) -> tuple[selectors.BaseSelector, set[int], int | None]:
    """A selector on both pipes (each made non-blocking and grown; its data the pipe's Capture) and on a
    pidfd of bash (data None), the pipes that grew (they hold a NAP's worth of output), and the pidfd."""
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    grown: set[int] = set()
    for stream, cap in zip((proc.stdout, proc.stderr), caps):
        os.set_blocking(stream.fileno(), False)
        try:
            fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)   # 3.10+ names it
            grown.add(stream.fileno())
        except OSError:
            pass   # over the user's pipe quota: the default size still works, in smaller reads, no naps
        sel.register(stream.fileno(), selectors.EVENT_READ, cap)
    pidfd = _pidfd(proc.pid)
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ, None)   # readable once bash has exited
    return sel, grown, pidfd


def _read_loop(proc: subprocess.Popen[bytes], sel: selectors.BaseSelector, grown: set[int], watching: bool,
               deadline: float, grace: float, sweep: Sweep) -> tuple[bool, bool]:
    """Read the pipes until they close. At `deadline` the command's group is ended (SIGTERM, SIGKILL
    after `grace`); once bash is gone (or was ended), what still holds the pipes is a leftover: it is
    killed and the pipes drained soon after. Returns whether it timed out, and whether the pidfd is
    still watched (bash had not exited when the pipes closed)."""
    buf = _read_buffer()
    hard_deadline = None
    timed_out = False
    while len(sel.get_map()) > (1 if watching else 0):
        now = time.monotonic()
        if hard_deadline is None and proc.poll() is not None:
            hard_deadline = now + 0.1   # bash is gone; whatever still holds the pipes is a leftover
        if not timed_out and now >= deadline:
            timed_out = True
            _terminate_group(proc, grace, sweep)
            hard_deadline = time.monotonic() + 0.5
        if hard_deadline is not None and now >= hard_deadline:
            _drain(sel, sweep)
            break
        limit = deadline if hard_deadline is None else hard_deadline
        wait = min(limit - now, 0.5 if watching else 0.02)
        for key, _ in sel.select(max(0.0, wait)):
            if key.data is None:
                sel.unregister(key.fd)
                watching = False
            else:
                _read_ready(sel, key, buf, grown)
    return timed_out, watching


def _read_ready(sel: selectors.BaseSelector, key: selectors.SelectorKey, buf: bytearray, grown: set[int]) -> None:
    """One read of a ready pipe into its Capture (a pipe at its end is unregistered); a hot command's
    short read is followed by a NAP, so that the next read takes a large piece."""
    try:
        size = os.readv(key.fd, [buf])
    except BlockingIOError:
        return
    if size:
        key.data.feed_from(buf, size)
        if size < CHUNK // 2 and key.data.total > HOT and key.fd in grown:
            time.sleep(NAP)
    else:
        sel.unregister(key.fd)


def _drain(sel: selectors.BaseSelector, sweep: Sweep) -> None:
    sweep.kill_leftovers()
    for key in list(sel.get_map().values()):
        while key.data is not None:
            try:
                data = os.read(key.fd, CHUNK)
            except (BlockingIOError, OSError):
                break
            if not data:
                break
            key.data.feed(data)


def _terminate_group(proc: subprocess.Popen[bytes], grace: float, sweep: Sweep) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except OSError:
        pass
    end = time.monotonic() + grace
    while time.monotonic() < end and proc.poll() is None:
        time.sleep(0.01)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    sweep.kill_leftovers()
