"""A real HTTP server on 127.0.0.1 that answers like a model provider, for adapter and retry tests.

Tests queue the responses (status, JSON body) it gives, in order, and read back the requests it
received (path, headers, JSON body). The official SDKs talk to it through their `base_url`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeProvider:
    url: str
    replies: list[tuple[int, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)

    def reply(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self.replies.append((status, body, headers or {}))


def _handler(provider: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            provider.requests.append(Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                                              json.loads(raw or b"{}")))
            status, body, headers = provider.replies.pop(0) if provider.replies else (
                500, {"error": {"type": "test_error", "message": "no reply queued"}}, {})
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
