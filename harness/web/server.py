"""Serving the console: a socket bound before anything is printed (so `--port 0` prints the port
really taken), uvicorn on it, and a clean stop.

`WebServer.serve_forever()` serves in the calling thread until Ctrl-C or SIGTERM; `start()` serves
from a background thread (tests, benchmarks, a host program) and `close()` stops it.
"""

from __future__ import annotations

import math
import secrets
import socket
import threading
import time
from pathlib import Path

import uvicorn

from harness.approval.queue import ApprovalQueue
from harness.core.listen import listening_socket
from harness.errors import ConfigError
from harness.web.app import VIEWS, Console, make_app
from harness.web.runs import Roots
from harness.web.sessions import DEFAULT_HOURS, Sessions


class WebServer:
    def __init__(self, console: Console, sock: socket.socket) -> None:
        self.console, self.sock = console, sock
        self.host, self.port = sock.getsockname()[:2]
        self.server = uvicorn.Server(uvicorn.Config(make_app(console), log_level="warning", access_log=False,
                                                    lifespan="off", timeout_graceful_shutdown=2,
                                                    server_header=False))
        self._thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """The sign-in URL: opening it sets the cookie and lands on the console."""
        return f"{self.base}/?token={self.console.token}"

    def serve_forever(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        except KeyboardInterrupt:
            pass
        finally:
            self.sock.close()

    def start(self) -> WebServer:
        self.server.config.install_signal_handlers = False   # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self.serve_forever, name="harness-web", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.01)
        return self

    def close(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> WebServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def default_roots(state_dir: Path) -> list[Path]:
    """`./runs` (where `harness run` and `harness eval` write by default) and the state folder's runs
    (where `harness run --repo` writes when started inside the project). The output folders recorded
    in the state folder (`harness.outputs`) are added as the console reads its list (`Roots`)."""
    return [Path("runs").resolve(), (state_dir / "runs").resolve()]


def make_web_server(queue: ApprovalQueue | None, roots: list[Path], *, host: str = "127.0.0.1", port: int = 8765,
                    token: str | None = None, extra_hosts: list[str] | None = None,
                    landing: str = "runs", state_dir: Path | None = None,
                    session_seconds: float = DEFAULT_HOURS * 3600) -> WebServer:
    """The console bound to `host:port` (0 picks a free port), not yet serving; with `state_dir`, it also
    shows the output folders recorded there. A sign-in lasts `session_seconds`."""
    if not (session_seconds > 0 and math.isfinite(session_seconds)):
        raise ConfigError(f"a session must last more than 0 seconds, got {session_seconds!r}; e.g. "
                          "--session-hours 12")
    if landing not in VIEWS:
        raise ConfigError(f"unknown landing view {landing!r}; expected one of {', '.join(VIEWS)}")
    sock = listening_socket(host, port, example_port=8766)
    sock.set_inheritable(True)
    bound = sock.getsockname()[1]
    names = {host, "127.0.0.1", "localhost"} | {h.split(":")[0] for h in extra_hosts or []}
    allowed = {f"{n}:{bound}" for n in names} | set(extra_hosts or [])
    console = Console(queue, Roots([Path(r) for r in roots], state_dir), token or secrets.token_urlsafe(24), allowed,
                      landing=landing, sessions=Sessions(session_seconds, f"harness_{bound}_{secrets.token_hex(4)}"))
    return WebServer(console, sock)
