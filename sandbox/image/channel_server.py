#!/usr/bin/env python3
"""The exec channel's in-sandbox end: one long-lived process per session.

It reads requests from stdin and writes answers to stdout, each a frame: a 4-byte big-endian length,
then that many bytes of UTF-8 JSON. One request at a time. There is no network in the sandbox; the
host reaches this process through the stdin/stdout of a `docker exec`.

Operations: ping, exec, read, write, put_tar, get_tar. `exec` runs a command with bash in its own
process group and session, stdin closed, output read with bounded memory (head, tail, lines that
match an error pattern, and the first bytes saved to a file); on timeout the whole group gets
SIGTERM, then SIGKILL after a grace period. After every command, every process the command left
behind (daemons, setsid'd children, SIGTERM-ignoring loops, threads whose main thread exited) is
killed, until a pass finds none left (`kill_leftovers`). Then, and only then, one bash is started
ahead for the next command (see `start_spare`). The server makes itself non-dumpable so that
commands, which run as the same user, cannot reach it through /proc (`make_undumpable`).

Runs on the sandbox's own Python (3.9 or newer), standard library only. This file is over 250
lines because it must be a single self-contained file copied into the image.
"""

from __future__ import annotations

import base64
import errno
import io
import json
import os
import re
import selectors
import signal
import struct
import subprocess
import sys
import time

WORKDIR = "/workspace"
MAX_FRAME = 1 << 30
CHUNK = 1 << 16


def read_frame(stream) -> dict | None:
    header = stream.read(4)
    if len(header) < 4:
        return None
    (size,) = struct.unpack(">I", header)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    body = stream.read(size)
    if len(body) < size:
        return None
    return json.loads(body.decode("utf-8"))


def write_frame(stream, obj: dict) -> None:
    body = json.dumps(obj).encode("utf-8")
    stream.write(struct.pack(">I", len(body)) + body)
    stream.flush()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Capture:
    """One output stream: counted in full, kept in bounded pieces."""

    def __init__(self, head_max: int, tail_max: int, save_path: str | None, save_max: int,
                 error_re: re.Pattern | None, error_max: int, save_over: tuple = (0, 0)) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.head_max, self.tail_max = head_max, tail_max
        self.total = 0
        self.lines = 0
        self.errors: list = []
        self.errors_total = 0
        self.error_re, self.error_max = error_re, error_max
        self.keywords = _keywords(error_re.pattern) if error_re is not None else None
        self.carry = b""
        self.save_path, self.save_max, self.saved = save_path, save_max, 0
        self.save_file = None   # opened only once the output outgrows the head
        # the host's own budget (bytes, lines): an output it will cut is saved even when the head holds
        # all of it, so the model can always page what it was not shown
        self.save_over = save_over

    def feed(self, chunk: bytes) -> None:
        before = self.total
        self.total += len(chunk)
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        rest = chunk[max(room, 0):]
        if rest:
            self.tail += rest
            if len(self.tail) > 2 * self.tail_max:
                del self.tail[: len(self.tail) - self.tail_max]
        if self.save_path:
            self._save(chunk, before)
        if self.error_re is not None:
            self._scan(chunk)
        else:
            self.lines += chunk.count(b"\n")

    def _save(self, chunk: bytes, before: int, force: bool = False) -> None:
        try:
            if self.save_file is None:
                if self.total <= self.head_max and not force:
                    return   # small outputs are never written to disk
                fd = os.open(self.save_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                self.save_file = open(fd, "wb", buffering=0)   # never through a link planted there
                self.saved = self.save_file.write(self.head[:before]) or 0
            if self.saved < self.save_max:
                self.saved += self.save_file.write(chunk[: self.save_max - self.saved]) or 0
        except OSError:
            # /tmp full or the file-size limit reached: keep what was saved, never fail the command
            self.save_max = self.saved
            if self.save_file is None:
                self.save_path = None

    def _scan(self, chunk: bytes) -> None:
        buf = self.carry + chunk
        end = buf.rfind(b"\n") + 1
        first_line = self.lines + 1
        if end:
            self.lines += buf.count(b"\n", 0, end)
            if self._may_match(buf):
                self._matches(buf, end, first_line)
        self.carry = buf[end:][-8192:]

    def _may_match(self, buf: bytes) -> bool:
        """False when `buf` holds none of the pattern's `(?#any-of:...)` words (so no line can match)."""
        if self.keywords is None:
            return True
        low = b"\n" + buf.lower()
        return any(word in low for word in self.keywords)

    def _matches(self, buf: bytes, end: int, first_line: int) -> None:
        if len(self.errors) >= self.error_max:
            self.errors_total += len(self.error_re.findall(buf, 0, end))
            return
        pos, line_no, counted_to = 0, first_line, 0
        while pos < end:
            m = self.error_re.search(buf, pos, end)
            if m is None:
                return
            start = buf.rfind(b"\n", 0, m.start()) + 1
            stop = buf.find(b"\n", m.start(), end)
            stop = end - 1 if stop < 0 else stop
            line_no += buf.count(b"\n", counted_to, start)
            counted_to = start
            self.errors_total += 1
            if len(self.errors) < self.error_max:
                self.errors.append([line_no, b64(buf[start:stop][:400])])
            pos = stop + 1

    def finish(self, keep_saved: bool) -> dict:
        if self.carry and self.error_re is not None and self.error_re.search(self.carry):
            self.errors_total += 1
            if len(self.errors) < self.error_max:
                self.errors.append([self.lines + 1, b64(self.carry[:400])])
        last = (self.tail or self.head)[-1:]
        if self.total and last != b"\n":
            self.lines += 1
        if self.total <= len(self.head) + len(self.tail):
            head, tail, truncated = bytes(self.head + self.tail), b"", False
        else:
            head, tail, truncated = bytes(self.head), bytes(self.tail[-self.tail_max:]), True
        saved_path = None
        over_bytes, over_lines = self.save_over
        cut = truncated or (over_bytes and self.total > over_bytes) or (over_lines and self.lines > over_lines)
        if cut and keep_saved and self.save_file is None and self.save_path:
            self._save(b"", self.total, force=True)
        if self.save_file is not None:
            self.save_file.close()
            if cut and keep_saved and self.saved:
                saved_path = self.save_path
            else:
                os.unlink(self.save_path)
        return {"head": b64(head), "tail": b64(tail), "total_bytes": self.total,
                "total_lines": self.lines, "truncated": truncated, "error_lines": self.errors,
                "error_lines_total": self.errors_total, "saved_path": saved_path,
                "saved_bytes": self.saved if saved_path else 0}


SPARE_PRELUDE = ('IFS= read -r -d "" __harness_cmd <&{fd}; exec {fd}<&-; BASH_EXECUTION_STRING=$__harness_cmd; '
                 'eval "unset __harness_cmd; : /bin/bash; $__harness_cmd"')   # `$_` as after bash -c
COMMAND_OOM_SCORE_ADJ = 500
SPARE_MAX_COMMAND = 16384   # bash reads a pipe one byte at a time: longer commands get a fresh bash
SWEEP_SECONDS = 2.0         # passes over /proc before the leftover sweep falls back to kill(-1)


def _spawn(argv: list, env: dict, cwd: str, pass_fds: tuple = ()) -> subprocess.Popen:
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, close_fds=True, pass_fds=pass_fds)
    try:   # under memory pressure the kernel kills the command's processes before the channel
        with open(f"/proc/{proc.pid}/oom_score_adj", "w") as f:
            f.write(str(COMMAND_OOM_SCORE_ADJ))
    except OSError:
        pass
    return proc


def _env_key(env: dict, cwd: str) -> str:
    return json.dumps([cwd, env], sort_keys=True)


def _keywords(pattern: bytes):
    """The words of a pattern's `(?#any-of:w1|w2|^w3)` comment, as lowercase bytes; `^w` = line start."""
    m = re.search(rb"\(\?#any-of:([^)]*)\)", pattern)
    if m is None:
        return None
    words = [w.lower() for w in m.group(1).split(b"|") if w]
    return [b"\n" + w[1:] if w.startswith(b"^") else w for w in words] or None


def _stat(path: str):
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


def _pidfd(pid: int):
    """A file descriptor that becomes readable when `pid` exits (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class Server:
    def __init__(self) -> None:
        self.me = os.getpid()
        self.uid = os.getuid()
        # Killing "every other process of this user" is only right inside a sandbox; never on a host.
        self.contained = os.path.exists("/.dockerenv") and self.uid != 0
        self.counter = 0
        self.initial = self._initial_processes()
        self.protected = {self.me}   # and the waiting bash: children keep their pid until reaped
        self.killed: set = set()   # leftovers killed during the current command
        self.clean = False         # the last sweep found no leftover, and no command ran since
        self.zombies: set = set()  # (pid, start time) of the agent's zombies the last pass saw
        self.spare = None          # (bash waiting for its command, pipe to send it, env key)
        self.want_spare = None     # (env, cwd) of the last command: start a spare bash like it

    # ---- process hygiene -------------------------------------------------------------------
    # A leftover is any process the server may signal (kill(pid, 0) succeeds: the agent's user, whatever
    # a process does to its /proc files) that is not the server, the waiting bash, one of the processes
    # found at start, or started from outside the container (ppid 0). It is killed while any of its
    # threads lives: a main thread that left with a raw exit() (not exit_group) shows Z while the other
    # threads go on. A zombie whose threads are all gone is harmless and is left to its parent or to
    # init to reap. A pass over /proc that finds no leftover proves none is left only if it saw the
    # whole picture (see `_leftovers`).
    def _processes(self) -> dict:
        """pid -> (ppid, state, start time) of every process in /proc."""
        procs = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                fields = _stat(f"/proc/{name}/stat")
                if fields is not None:
                    procs[int(name)] = (int(fields[1]), fields[0], int(fields[19]))
        return procs

    def _initial_processes(self) -> set:
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

    def _leftovers(self) -> tuple:
        """The leftovers one pass over /proc finds, and whether the pass was conclusive.

        A process that forks and exits in a chain always lives under a pid newer than the listing of
        /proc; what the listing holds of it is a member that was gone, or a fresh zombie, by the time
        the pass looked. So a pass is conclusive only when no listed process vanished and every zombie
        of the agent's it saw was a zombie in the previous pass too.
        """
        found, conclusive, zombies = [], True, set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid, fields = int(name), _stat(f"/proc/{name}/stat")
            if fields is None:
                conclusive = False
                continue
            ppid, state, start = int(fields[1]), fields[0], int(fields[19])
            if ppid == 0 or pid in self.protected or (pid, start) in self.initial:
                continue
            try:
                os.kill(pid, 0)
            except OSError as exc:
                conclusive = conclusive and exc.errno == errno.EPERM   # another user's; ESRCH: gone
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

    # ---- operations -------------------------------------------------------------------------
    def op_ping(self, req: dict) -> dict:
        return {"pid": self.me, "uid": self.uid, "python": sys.version.split()[0]}

    def op_exec(self, req: dict) -> dict:
        self.counter += 1
        out_dir = req.get("output_dir")
        if out_dir:
            try:
                os.makedirs(out_dir, exist_ok=True)
            except OSError:
                out_dir = None   # the agent removed or replaced it: run the command without saving
        pattern = req.get("error_pattern")
        error_re = re.compile(pattern.encode(), re.MULTILINE) if pattern else None
        caps = []
        for name in ("stdout", "stderr"):
            path = f"{out_dir}/cmd-{self.counter}.{name}.txt" if out_dir else None
            caps.append(Capture(req.get("head_bytes", 32768), req.get("tail_bytes", 32768), path,
                                req.get("save_bytes", 8 << 20), error_re, req.get("error_lines", 50),
                                (int(req.get("save_over_bytes", 0)), int(req.get("save_over_lines", 0)))))
        env, cwd = req.get("env") or {}, req.get("cwd", WORKDIR)
        self.killed = set()
        self.clean = False
        started = time.monotonic()
        try:
            proc = self._take_spare(req["command"], env, cwd) or _spawn(["/bin/bash", "-c", req["command"]], env, cwd)
        except OSError as exc:
            for c in caps:
                c.finish(False)
            return {"spawn_error": f"{type(exc).__name__}: {exc}"}
        self.want_spare = (env, cwd)
        try:
            timed_out = self._pump(proc, caps, float(req.get("timeout", 60)), float(req.get("grace", 2)))
        finally:
            if proc.poll() is None:   # only when reading failed: never leave the command running
                self._terminate_group(proc, 0)
        code = proc.wait()
        duration = time.monotonic() - started
        self.kill_leftovers()
        killed = len(self.killed)
        exit_code = 128 - code if code < 0 else code
        return {"exit_code": exit_code, "duration": duration, "timed_out": timed_out,
                "killed_leftovers": killed,
                "stdout": caps[0].finish(req.get("save", True)),
                "stderr": caps[1].finish(req.get("save", True))}

    # ---- a bash started ahead of time ---------------------------------------------------------
    # Starting bash costs a few milliseconds, most of a trivial command's round trip. After each
    # answer is sent, a bash for the next command is started and left waiting on a pipe for its
    # command text; it then runs it exactly as `bash -c` would (same env, cwd, process group, stdin).
    # The waiting bash runs as the agent's user and is dumpable (exec makes it so): any process of that
    # user could open /proc/<it>/fd/N and write into its command pipe (text run by the next command)
    # or its stdout (text in the next answer), or ptrace it. So it is started only when the sweep after
    # the last command found no leftover (`self.clean`); until the next command no process of the
    # agent exists, since only this server starts them. (Processes started from outside the container,
    # ppid 0, such as an operator's `docker exec -u agent`, are not the agent's and could reach it.)
    def start_spare(self) -> None:
        if self.want_spare is None or self.spare is not None or not self.clean:
            return
        env, cwd = self.want_spare
        self.want_spare = None
        read_end, write_end = os.pipe()
        try:
            proc = _spawn(["/bin/bash", "-c", SPARE_PRELUDE.format(fd=read_end)], env, cwd, (read_end,))
        except OSError:
            os.close(write_end)
            return
        finally:
            os.close(read_end)
        self.protected.add(proc.pid)
        self.spare = (proc, write_end, _env_key(env, cwd))

    def _take_spare(self, command: str, env: dict, cwd: str):
        """The waiting bash, now running `command`; None when it does not fit (then start a new one)."""
        if self.spare is None:
            return None
        proc, write_end, key = self.spare
        self.spare = None
        self.protected.discard(proc.pid)
        data = command.encode("utf-8", "surrogateescape")
        # SIGPIPE is fatal to the server (see main): if the waiting bash was killed (from outside, or
        # by the OOM killer), the write must fail with EPIPE instead
        pipe_action = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        try:
            if key == _env_key(env, cwd) and len(data) <= SPARE_MAX_COMMAND and b"\0" not in data:
                os.write(write_end, data)
                return proc
        except OSError:
            pass   # it died while waiting
        finally:
            signal.signal(signal.SIGPIPE, pipe_action)
            os.close(write_end)
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            stream.close()
        return None

    def _pump(self, proc: subprocess.Popen, caps: list, timeout: float, grace: float) -> bool:
        """Read both pipes until they close; returns whether the command timed out."""
        sel = selectors.DefaultSelector()
        for stream, cap in zip((proc.stdout, proc.stderr), caps):
            os.set_blocking(stream.fileno(), False)
            sel.register(stream.fileno(), selectors.EVENT_READ, cap)
        pidfd = watching = _pidfd(proc.pid)
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, None)   # readable once bash has exited
        deadline = time.monotonic() + timeout
        hard_deadline = None
        timed_out = False
        while len(sel.get_map()) > (1 if watching is not None else 0):
            now = time.monotonic()
            if hard_deadline is None and proc.poll() is not None:
                hard_deadline = now + 0.1   # bash is gone; whatever still holds the pipes is a leftover
            if not timed_out and now >= deadline:
                timed_out = True
                self._terminate_group(proc, grace)
                hard_deadline = time.monotonic() + 0.5
            if hard_deadline is not None and now >= hard_deadline:
                self._drain(sel)
                break
            limit = deadline if hard_deadline is None else hard_deadline
            wait = min(limit - now, 0.5 if watching is not None else 0.02)
            for key, _ in sel.select(max(0.0, wait)):
                if key.data is None:
                    sel.unregister(key.fd)
                    watching = None
                    continue
                try:
                    data = os.read(key.fd, CHUNK)
                except BlockingIOError:
                    continue
                if data:
                    key.data.feed(data)
                else:
                    sel.unregister(key.fd)
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
                self._terminate_group(proc, grace)
        return timed_out

    def _drain(self, sel: selectors.BaseSelector) -> None:
        self.kill_leftovers()
        for key in list(sel.get_map().values()):
            while key.data is not None:
                try:
                    data = os.read(key.fd, CHUNK)
                except (BlockingIOError, OSError):
                    break
                if not data:
                    break
                key.data.feed(data)

    def _terminate_group(self, proc: subprocess.Popen, grace: float) -> None:
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
        self.kill_leftovers()

    def op_read(self, req: dict) -> dict:
        import hashlib   # imported when first needed: it, and tarfile, slow the channel's start-up
        path = os.path.join(WORKDIR, req["path"])
        real = os.path.realpath(path)
        digest = hashlib.sha256()
        limit = req.get("max_bytes")
        kept = bytearray()
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            while True:
                block = f.read(1 << 20)
                if not block:
                    break
                digest.update(block)
                if limit is None or len(kept) < limit:
                    kept += block if limit is None else block[: limit - len(kept)]
        return {"realpath": real, "data": b64(bytes(kept)), "sha256": digest.hexdigest(), "size": size}

    def op_write(self, req: dict) -> dict:
        import hashlib
        path = os.path.join(WORKDIR, req["path"])
        data = base64.b64decode(req["data"])
        expect = req.get("expect_sha256")
        try:
            with open(path, "rb") as f:
                current = hashlib.sha256(f.read()).hexdigest()
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            current, mode = "", 0o644
        if expect is not None and expect != current:
            return {"written": False, "conflict": True, "sha256": current}
        if req.get("mode") is not None:
            mode = int(req["mode"])
        parent = os.path.dirname(path) or "."
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{os.path.basename(path)}.harness-tmp-{os.getpid()}")
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        return {"written": True, "conflict": False, "sha256": hashlib.sha256(data).hexdigest()}

    def op_put_tar(self, req: dict) -> dict:
        import tarfile
        dest = req.get("dest", WORKDIR)
        os.makedirs(dest, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(req["data"])), mode="r:") as tar:
            members = []
            for m in tar.getmembers():
                parts = m.name.split("/")
                if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir() or m.issym()):
                    raise ValueError(f"refusing tar member {m.name!r}")
                m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""
                members.append(m)
            tar.extractall(dest, members=members, numeric_owner=True)
        return {"count": len(members)}

    def op_get_tar(self, req: dict) -> dict:
        import tarfile
        src = req.get("src", WORKDIR)
        max_bytes, max_files = int(req["max_bytes"]), int(req["max_files"])
        exclude = set(req.get("exclude", []))
        buf = io.BytesIO()
        total = count = 0
        skipped = []
        with tarfile.open(fileobj=buf, mode="w:") as tar:
            for root, dirs, files in os.walk(src, followlinks=False):
                dirs[:] = sorted(d for d in dirs if d not in exclude)
                for name in sorted(dirs) + sorted(files):
                    full = os.path.join(root, name)
                    rel = os.path.relpath(full, src)
                    info = tar.gettarinfo(full, arcname=rel)
                    if info is None or not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
                        skipped.append(rel)   # sockets and fifos hold no content
                        continue
                    if info.islnk():          # a hard link inside the tree: copied as the file it is
                        info.type, info.linkname, info.size = tarfile.REGTYPE, "", os.lstat(full).st_size
                    count += 1
                    total += info.size if info.isfile() else 0
                    if count > max_files or total > max_bytes:
                        return {"too_large": True, "count": count, "bytes": total}
                    if info.isfile():
                        with open(full, "rb") as f:
                            tar.addfile(info, f)
                    else:
                        tar.addfile(info)
        return {"data": b64(buf.getvalue()), "count": count, "bytes": total, "skipped": skipped}

    def handle(self, req: dict) -> dict:
        op = getattr(self, "op_" + str(req.get("op")), None)
        if op is None:
            return {"ok": False, "error": {"type": "ValueError", "message": f"unknown op {req.get('op')!r}"}}
        try:
            result = op(req)
        except OSError as exc:
            return {"ok": False, "error": {"type": type(exc).__name__, "errno": exc.errno,
                                           "message": exc.strerror or str(exc), "filename": exc.filename}}
        except Exception as exc:  # noqa: BLE001 - reported to the host, the channel lives on
            return {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}
        result["ok"] = True
        return result


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE 0: the agent (same user) can no longer open this process's /proc files.

    Without it a command could write forged answers into /proc/<this pid>/fd/1 (the host would take
    them for the channel's) or rewrite this process through /proc/<pid>/mem. Commands are not
    affected: exec() makes each of them dumpable again.
    """
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0   # PR_SET_DUMPABLE, SUID_DUMP_DISABLE
    except (OSError, AttributeError, ImportError):
        return False


def main() -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    guarded = make_undumpable()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    server = Server()
    server.kill_leftovers()   # orphans of a channel that died
    write_frame(stdout, {"ok": True, "ready": True, "pid": server.me, "guarded": guarded})
    while True:
        req = read_frame(stdin)
        if req is None:
            return 0
        write_frame(stdout, server.handle(req))
        server.start_spare()


if __name__ == "__main__":
    sys.exit(main())
