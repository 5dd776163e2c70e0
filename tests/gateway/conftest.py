"""The gateway behind a real HTTP server on 127.0.0.1, as the sandbox's relay will put it: each request
read whole, handed to `Gateway.handle`, its answer written back (any method, CONNECT included)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from harness.gateway import Gateway
from harness.models.scripted import ScriptedModel
from sandbox.loopback import HttpRequest


def _handler_class(handle: Callable[[HttpRequest], Any]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            answer = handle(HttpRequest(self.command, self.path, tuple(self.headers.items()), body))
            self.send_response(answer.status, answer.reason)
            for name, value in answer.headers:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(answer.body)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_CONNECT = _serve

        def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 - the stdlib's name
            pass

    return Handler


@contextmanager
def served(gateway: Gateway) -> Iterator[str]:
    """`http://127.0.0.1:PORT` serving `gateway` for the length of the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(gateway.handle))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def bash_then_done(usage: dict[str, int] | None = None) -> ScriptedModel:
    """Two turns: a bash call, then a final text."""
    u = usage or {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 30}
    return ScriptedModel([
        {"content": [{"type": "text", "text": "Looking."},
                     {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls -la"}}],
         "usage": u},
        {"content": [{"type": "text", "text": "All done."}], "usage": u},
    ], name="scripted:test")


@pytest.fixture
def scripted() -> ScriptedModel:
    return bash_then_done()
