"""Real parts for the approval tests: a counting HTTP server on 127.0.0.1 and an outbound call
made by a separate harness process (so it can be killed and restarted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

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

    def __enter__(self) -> "CountingServer":
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
               policy: Path | None = None, timeout: float = 60.0) -> subprocess.Popen[str]:
    """Run one http_request tool call in a new harness process; its stdout is one JSON line."""
    cmd = [sys.executable, str(CALLER), "--state-dir", str(state_dir), "--mode", mode, "--url", url,
           "--key", key, "--body", body, "--timeout", str(timeout)]
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
