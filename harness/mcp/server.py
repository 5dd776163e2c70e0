"""`harness mcp`: the hardened sandbox as an MCP server (the official `mcp` SDK, low-level `Server`).

    SandboxService(root, config, approve=..., python=...)      `harness.mcp.service`: the tools and the
        sessions' workspaces. stdio has one session, the process; over HTTP a session is the handshake
        era's `Mcp-Session-Id`, else the client's `Harness-Session` header, else one shared session,
        each removed after `idle_seconds` without a call.
    build_server(service)          the MCP `Server`: tools/list and tools/call
    serve_stdio(service)           what MCP clients launch
    serve_http(service, port, token_file)
                                   streamable HTTP on 127.0.0.1, every request carrying the bearer token

This module holds the transports only; bash answers with structured content too (exit code, duration,
sizes, truncation, saved-output paths; `OUTPUT_SCHEMA`), and `isError` is set exactly where our tools
report an error (`service.to_mcp`). What stands in front of the HTTP app is in `http_guard.py` (token,
session cap); the patch out in `changes.py`, the approver's view of binary changes in `patch_preview.py`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from importlib.metadata import version
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from harness.core.listen import listening_socket
from harness.errors import HarnessError
from harness.mcp.http_guard import BearerToken, SessionCap
from harness.mcp.service import SandboxService, to_mcp
from harness.mcp.specs import IDLE_SECONDS
from sandbox.text import escape_unsafe

__all__ = ["SandboxService", "build_server", "http_app", "serve_http", "serve_stdio", "to_mcp"]

SERVER_NAME = "harness"
STDIO_SESSION = "stdio"
SHARED_SESSION = "shared"
SESSION_HEADER = "harness-session"


def _session_key(ctx: Any, default: str) -> str:
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is None:
        return default
    for name in ("mcp-session-id", SESSION_HEADER):
        value = headers.get(name)
        if value:
            return f"{name}:{value[:200]}"
    return default


def build_server(service: SandboxService, default_session: str = STDIO_SESSION) -> Server[Any]:
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=service.mcp_tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        key = _session_key(ctx, default_session)
        try:
            return await anyio.to_thread.run_sync(service.call, key, params.name, params.arguments,
                                                  abandon_on_cancel=True)
        except (HarnessError, Exception) as exc:   # the harness failed: said, the session goes on
            message = f"the harness could not run {params.name}: {type(exc).__name__}: {exc}"
            service.say(message)
            return types.CallToolResult(content=[types.TextContent(type="text", text=escape_unsafe(message))],
                                        is_error=True)

    return Server(SERVER_NAME, version=version("harness"), on_list_tools=list_tools, on_call_tool=call_tool,
                  instructions=f"A network-less, hardened sandbox holding the files of {service.root}. "
                               "Nothing you do changes that folder until `apply_changes` is approved.")


MAX_LINE = 256 * 1024 * 1024
"""The longest JSON-RPC message read (a `write` of a large file is one line)."""


class _PipeLines:
    """The lines of a pipe read without threads: non-blocking reads when the event loop says it is
    readable (the SDK's own stdio reads each line in a worker thread, several thread hops a call)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer = fd, bytearray()
        os.set_blocking(fd, False)

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        start = 0
        while True:
            end = self.buffer.find(b"\n", start)
            if end >= 0:
                line = bytes(self.buffer[:end + 1])
                del self.buffer[:end + 1]
                return line.decode("utf-8", "replace")
            start = len(self.buffer)
            if start > MAX_LINE:
                raise HarnessError(f"an MCP message over {MAX_LINE} bytes arrived on stdin; refused")
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            if not chunk:
                if self.buffer:
                    rest = bytes(self.buffer)
                    self.buffer.clear()
                    return rest.decode("utf-8", "replace")
                raise StopAsyncIteration
            self.buffer += chunk


class _PipeWriter:
    """Writes to a pipe without threads, waiting for room when the reader is slow."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                data = data[os.write(self.fd, data):]
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
            except BrokenPipeError as exc:     # the client went away
                raise anyio.ClosedResourceError from exc

    async def flush(self) -> None:
        return None


@contextlib.contextmanager
def _claimed_stdio() -> Iterator[tuple[int, int]]:
    """Private copies of fds 0 and 1 for the protocol; fd 0 then reads /dev/null and fd 1 goes to
    stderr, so nothing else in the process (or a child) reads or writes the wire. Restored after."""
    wire_in, wire_out = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3), fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_in, saved_out = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3), fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        os.close(null)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, wire_in, wire_out):
            os.close(fd)


def serve_stdio(service: SandboxService) -> None:
    """Serve one session over stdin/stdout until the client closes them; the sandbox goes with it."""
    server = build_server(service, STDIO_SESSION)

    async def main(wire_in: int, wire_out: int) -> None:
        lines, writer = _PipeLines(wire_in), _PipeWriter(wire_out)
        async with stdio_server(lines, writer) as (read, write):  # type: ignore[arg-type]
            await server.run(read, write, server.create_initialization_options())

    try:
        with _claimed_stdio() as (wire_in, wire_out):
            service.begin()
            anyio.run(main, wire_in, wire_out)
    except (anyio.ClosedResourceError, BrokenPipeError):
        service.say("the client went away")
    finally:
        service.close("the MCP client's session ended (its connection closed)")


def http_app(service: SandboxService, token: str, idle_seconds: float = IDLE_SECONDS) -> Any:
    """The ASGI app: the SDK's streamable HTTP app behind the token, sessions' sandboxes removed with them."""
    server = build_server(service, SHARED_SESSION)
    app = server.streamable_http_app(host="127.0.0.1", session_idle_timeout=idle_seconds,
                                     max_sessions=service.max_sessions)
    manager = server.session_manager
    discard = manager._discard_session   # noqa: SLF001 - the one place the SDK ends a session

    async def discard_with_sandbox(session_id: str, transport: Any) -> None:
        try:
            await discard(session_id, transport)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(service.end, f"mcp-session-id:{session_id}")

    manager._discard_session = discard_with_sandbox  # type: ignore[method-assign]  # noqa: SLF001
    return BearerToken(SessionCap(app, service), token)


def serve_http(service: SandboxService, port: int, token: str, *, idle_seconds: float = IDLE_SECONDS,
               ready: Callable[[int], None] | None = None) -> None:
    """Serve on 127.0.0.1:`port` (0: any free port) until interrupted; every sandbox removed at the end."""
    app = http_app(service, token, idle_seconds)
    sock = listening_socket("127.0.0.1", port, example_port=8771, backlog=2048)
    bound = sock.getsockname()[1]
    stop = threading.Event()

    def sweep() -> None:
        while not stop.wait(min(60.0, idle_seconds / 4)):
            service.end_idle(idle_seconds)

    sweeper = threading.Thread(target=sweep, name="mcp-idle-sweeper", daemon=True)
    sweeper.start()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    service.begin()
    if ready is not None:
        ready(bound)
    try:
        server.run(sockets=[sock])
    finally:
        stop.set()
        service.close()
        sock.close()
