"""Real parts for the approval tests: a counting HTTP server on 127.0.0.1 and an outbound call
made by a separate harness process (so it can be killed and restarted)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CALLER = Path(__file__).with_name("call_outbound.py")


@dataclass
class Hit:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]


@dataclass
class CountingServer:
    """Counts every request it receives. Path /hang answers only after `release` is set."""

    hits: list[Hit] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    routes: dict[str, tuple[str, bytes]] = field(default_factory=dict)   # path -> (content type, body)

    def __enter__(self) -> CountingServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else b""
                outer.hits.append(Hit(self.command, self.path, body, dict(self.headers)))
                if self.path.startswith("/hang"):
                    outer.release.wait(60)
                if self.path.startswith("/redirect"):
                    self.send_response(302)
                    self.send_header("Location", f"http://127.0.0.1:{outer.port}/elsewhere")
                    self.end_headers()
                    return
                ctype, reply = outer.routes.get(
                    self.path, ("text/plain", f"hit {len(outer.hits)} {self.command} {self.path}".encode()))
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str = "/collect") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def count(self, path: str | None = None) -> int:
        return len([h for h in self.hits if path is None or h.path == path])


def start_call(state_dir: Path, url: str, key: str, *, mode: str = "queue", body: str = "payload",
               policy: Path | None = None, timeout: float = 60.0, method: str = "POST") -> subprocess.Popen[str]:
    """Run one http_request tool call in a new harness process; its stdout is one JSON line."""
    cmd = [sys.executable, str(CALLER), "--state-dir", str(state_dir), "--mode", mode, "--url", url,
           "--key", key, "--body", body, "--timeout", str(timeout), "--method", method]
    if policy is not None:
        cmd += ["--policy", str(policy)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def finish_call(proc: subprocess.Popen[str], timeout: float = 60.0) -> dict[str, object]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"caller failed (exit {proc.returncode}): {err}"
    return json.loads(out.strip().splitlines()[-1])


def wait_for(predicate: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> object:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def harness_cli(*args: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    """The real `harness` command line, in a new process."""
    return subprocess.run([sys.executable, "-m", "harness.cli.main", "approvals", "--state-dir", str(state_dir),
                           *args], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def approve(state_dir: Path, request_id: int, *extra: str) -> subprocess.CompletedProcess[str]:
    """`harness approvals approve ID --hash H`, H being the hash `show` prints (what a human reads first)."""
    shown = json.loads(harness_cli("show", str(request_id), "--json", state_dir=state_dir).stdout)
    return harness_cli("approve", str(request_id), "--hash", shown["request_hash"], *extra, state_dir=state_dir)


class Terminal:
    """A harness process whose stdin and stdout are the slave side of a pseudo-terminal."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, cwd=REPO,
                                     env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
        os.close(slave)
        self.screen = b""

    def read_until(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.time() + timeout
        while text.encode() not in self.screen:
            assert time.time() < deadline, (f"{text!r} never appeared; the terminal shows:\n"
                                            f"{self.screen.decode(errors='replace')}")
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:       # the process ended and closed the terminal
                    break
        return self.screen.decode(errors="replace")

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def result(self) -> dict[str, object]:
        self.read_until('"text"')
        self.proc.wait(20)
        last = [ln for ln in self.screen.decode(errors="replace").splitlines() if ln.startswith("{")][-1]
        return json.loads(last)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)


def make_wheel(name: str, version: str, module_text: str = "", requires: tuple[str, ...] = ()) -> bytes:
    """A minimal valid pure-Python wheel holding one module, with these `Requires-Dist` lines."""
    dist = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {f"{name}/__init__.py": (module_text or f"VERSION = {version!r}\n").encode(),
             f"{dist}/METADATA": meta.encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{dist}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in {**files, f"{dist}/RECORD": record.encode()}.items():
            zf.writestr(path, data)
    return buf.getvalue()
