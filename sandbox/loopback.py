"""HTTP requests made inside a sandbox to its own loopback, answered on the host.

A sandbox has no network. A port on the container's own loopback (127.0.0.1) can still be served by a
handler on the host: a small relay process inside accepts each connection, reads one HTTP request and
passes it over a `docker exec` stream to the host, which answers it (`sandbox.relay`). These are the two
values that cross: what the client inside sent, and what it gets back. Everything in a request is
written by the sandbox and is hostile: bounded by the relay, validated by the handler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class HttpRequest:
    """One request as the client inside sent it: `target` is the request line's target as written
    (`/v1/chat/completions`, or `http://pypi.org/simple/` for a proxy request, or `pypi.org:443` for
    CONNECT); header names keep their case and order."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first header called `name` (any case), or None."""
        lowered = name.lower()
        return next((value for key, value in self.headers if key.lower() == lowered), None)


@dataclass(frozen=True)
class HttpResponse:
    """The answer the client inside receives. `reason` is the status line's phrase: most clients
    print it when a proxy refuses a tunnel, so it carries the explanation there too."""

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


HttpHandler = Callable[[HttpRequest], HttpResponse]
"""Answers one request; called on a host thread, possibly several at once. An exception it raises is
answered as 500 with no detail (the handler is expected to answer its own errors)."""
