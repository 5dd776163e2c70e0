"""What stands in front of `harness mcp --http`'s MCP app: the bearer token and the session cap.

    BearerToken(app, token)      every request carries `Authorization: Bearer <token>`, else 401
    SessionCap(app, service)     a request that would open a session is admitted only while the service
                                 has room, else 503 with a JSON-RPC error saying the cap, how many are
                                 open and how to raise it (`SessionsFull`)
    write_token(path)            the token, written 0600
"""

from __future__ import annotations

import hmac
import json
import secrets
from pathlib import Path
from typing import Any, Protocol

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from harness import checks
from harness.errors import HarnessError


class SessionsFull(HarnessError):
    """A new session was refused: the server has `cap` sessions open (`open`)."""

    def __init__(self, message: str, *, cap: int, open_now: int) -> None:
        super().__init__(message)
        self.cap, self.open_now = cap, open_now


class Admits(Protocol):
    """The service's side of the cap (`harness.mcp.server.SandboxService`)."""

    def admit_handshake(self) -> None: ...
    def settle_handshake(self, key: str | None) -> None: ...
    def say(self, message: str) -> None: ...


class BearerToken:
    """ASGI middleware: every request carries `Authorization: Bearer <token>`, else 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body",
                            "body": b"missing or wrong bearer token (harness mcp --http printed where it is)\n"})
                return
        await self.app(scope, receive, send)


class SessionCap:
    """ASGI middleware: a request that would open a handshake-era session (a POST without
    `Mcp-Session-Id`, in a handshake protocol version) is admitted only while the service has room
    (`Admits.admit_handshake`), else answered 503 with a JSON-RPC error saying the cap, how many
    sessions are open and how to raise it; the session it opens is counted until it ends."""

    def __init__(self, app: Any, service: Admits) -> None:
        self.app, self.service = app, service

    @staticmethod
    def _opens_session(scope: Any) -> bool:
        headers = dict(scope.get("headers") or [])
        version = headers.get(b"mcp-protocol-version")
        return (scope["type"] == "http" and scope.get("method") == "POST" and b"mcp-session-id" not in headers
                and (version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if not self._opens_session(scope):
            await self.app(scope, receive, send)
            return
        try:
            self.service.admit_handshake()
        except SessionsFull as exc:
            self.service.say(str(exc))
            body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32000, "message": str(exc), "data": {"max_sessions": exc.cap, "open": exc.open_now}}})
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body.encode()})
            return
        opened: list[str] = []

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                opened.extend(v.decode("latin-1") for k, v in message.get("headers", []) if k == b"mcp-session-id")
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self.service.settle_handshake(f"mcp-session-id:{opened[0]}" if opened else None)


def write_token(path: Path, token: str | None = None) -> str:
    token = token or secrets.token_urlsafe(32)
    checks.private_dir(Path(path).parent)
    checks.write_file(Path(path), token + "\n")
    return token
