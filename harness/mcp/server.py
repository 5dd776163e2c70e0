"""`harness mcp`: the hardened sandbox as an MCP server (the official `mcp` SDK, low-level `Server`).

    SandboxService(root, config, approve=..., python=...)
        the tools and the sessions. One sandbox per MCP session, holding the folder's files (selected
        and with its environment resolved as `harness run --repo` does), started on the session's
        first tool call and removed when the session ends: stdio has one session, the process; over
        HTTP a session is the handshake era's `Mcp-Session-Id`, else the client's `Harness-Session`
        header, else one shared session, each removed after `idle_seconds` without a call.
    build_server(service)          the MCP `Server`: tools/list and tools/call
    serve_stdio(service)           what MCP clients launch
    serve_http(service, port, token_file)
                                   streamable HTTP on 127.0.0.1, every request carrying the bearer token

The catalog is the agent loop's (bash, view, search, find_code, edit, apply_patch, write) with the same
schemas, idempotency keys and compare-and-swap; bash answers with structured content too (exit code,
duration, sizes, truncation, saved-output paths; `OUTPUT_SCHEMA`). `isError` is set exactly where our
tools report an error. The outbound tools (http_request, pip_download, git_push) and `apply_changes`,
which writes the session's patch into the folder, pass the approval gate; `propose_changes` only
shows the patch. The folder on the host is only read until an `apply_changes` is approved.

Over 400 lines: the service (its sessions and their cap, the patch out) and the two transports it is served
on belong together; what stands in front of the HTTP app is in `http_guard.py` (token, session cap), the
approver's view of binary changes in `patch_preview.py`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from harness import checks
from harness.approval.gate import ApprovalGate
from harness.approval.wiring import make_gate
from harness.config import Config
from harness.core.apply import PatchConflict, apply_to_tree, load_run
from harness.core.listen import listening_socket
from harness.core.project import select_files
from harness.errors import HarnessError, TaskError, ToolArgumentsError, ToolError
from harness.inplace import RepoTask, repo_task, selection_lines, write_base
from harness.mcp.http_guard import BearerToken, SessionCap, SessionsFull
from harness.mcp.patch_preview import binary_changes, describe_binary, refusal, shown_patch
from harness.mcp.specs import IDLE_SECONDS, MAX_SESSIONS, session_limits
from harness.messages import ToolResult, ToolUse
from harness.session import session_image
from harness.tools.base import Effect, Observation, Tool, ToolContext
from harness.tools.catalog import Catalog, default_catalog
from harness.tools.outbound.action import OutboundAction, Prepared, outbound_tool
from harness.tools.outbound.preview import safe_text
from harness.tools.outbound.registry import outbound_tools
from harness.tools.retrieval.find_code import warm_index
from harness.workspace import Baseline, sandbox_patch, start_baseline
from sandbox.api import Limits, SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.pool import WarmPool
from sandbox.text import escape_unsafe

SERVER_NAME = "harness"
STDIO_SESSION = "stdio"
SHARED_SESSION = "shared"
SESSION_HEADER = "harness-session"
PROBLEM = "(an MCP client's session: no problem statement)"

PATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "files": {"type": "array", "items": {"type": "string"}, "description": "paths the patch touches"},
        "patch": {"type": "string", "description": "unified diff against the folder as the session found it"},
    },
    "required": ["files", "patch"],
}


@dataclass
class Workspace:
    """One MCP session's sandbox and the state its tool calls share."""

    key: str
    signature: str             # the folder's selection (names, sizes, times) when its files were staged
    repo: RepoTask
    box: DockerSandbox
    baseline: Baseline
    ctx: ToolContext
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    calls: int = 0

    def close(self) -> None:
        self.ctx.code_index.stop_warming.set()
        try:
            self.box.close()
        finally:
            self.repo.cleanup()


Say = Callable[[str], None]


def _stderr(message: str) -> None:
    """Progress on stderr (stdout is the protocol's), escaped: messages quote paths and errors."""
    sys.stderr.write(escape_unsafe(f"harness mcp: {message}") + "\n")
    sys.stderr.flush()


class SandboxService:
    """The tools an MCP client sees and the sandboxes of its sessions (see the module docstring)."""

    def __init__(self, root: Path, config: Config, *, approve: str | None = None, python: str = "3.11",
                 include: tuple[str, ...] = (), say: Say = _stderr, gate: ApprovalGate | None = None,
                 pool: int = 0, max_sessions: int = MAX_SESSIONS, limits: Limits | None = None,
                 allow_binary: bool = False) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            raise TaskError(f"--dir {str(root)!r} is not a folder; give the project's folder, e.g. "
                            "harness mcp --dir ~/code/shop")
        self.config, self.python, self.include, self.say = config, python, include, say
        self.allow_binary = allow_binary     # apply_changes may write files git treats as binary (shown escaped)
        self.gate = gate or make_gate(config, approve or config.approval.mode)
        extra = [*outbound_tools(config), self._propose_tool(), outbound_tool(self._apply_action())]
        self.catalog: Catalog = default_catalog(config, extra=extra)
        self._sessions: dict[str, Workspace] = {}
        self._starting: dict[str, threading.Lock] = {}
        # the cap counts every session: with a sandbox, starting one, or an HTTP handshake's (and those
        # being admitted), so no client can hold more than `max_sessions` sandboxes' memory
        self.max_sessions = max_sessions
        self.limits = limits or session_limits(config.sandbox.limits)
        self._opening: set[str] = set()
        self._handshakes: set[str] = set()
        self._admitting = 0
        self._guard = threading.Lock()
        self._closed = False
        self.pool_size = pool
        self.pool: WarmPool[Workspace] = self._make_pool(0)   # `begin` starts the real one

    def _make_pool(self, size: int) -> WarmPool[Workspace]:
        """Sessions' sandboxes started ahead (staged, started, baseline made); one whose folder changed
        since is replaced at `take`."""
        return WarmPool(self._prepare, size, lambda w: w.close(),
                        is_fresh=lambda w: w.signature == self._signature(), report=self.say)

    def begin(self) -> None:
        """Start filling the warm pool: called once serving has begun (on stdio, after the protocol's
        pipes were taken away from fds 0 and 1, so no child the pool starts inherits them)."""
        if self.pool_size:
            self.pool = self._make_pool(self.pool_size)

    # -- the MCP side --------------------------------------------------------------------------
    def mcp_tools(self) -> list[types.Tool]:
        tools = []
        for tool in self.catalog.tools.values():
            hints = types.ToolAnnotations(read_only_hint=tool.effect == Effect.READ,
                                          open_world_hint=tool.effect == Effect.OUTBOUND,
                                          destructive_hint=tool.effect != Effect.READ)
            tools.append(types.Tool(name=tool.name, description=tool.description, input_schema=tool.parameters,
                                    output_schema=tool.output_schema, annotations=hints))
        return tools

    def call(self, session: str, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Run one tool call in `session`'s sandbox (started on its first call). Blocking."""
        if name not in self.catalog.tools:   # answered without starting a sandbox
            result = self.catalog.execute(ToolUse(f"mcp-{uuid.uuid4().hex[:12]}", name, arguments or {}),
                                          ToolContext(sandbox=None, session=session))  # type: ignore[arg-type]
            return to_mcp(result)
        try:
            workspace = self._workspace(session)
        except SessionsFull as exc:
            self.say(str(exc))
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)
        with workspace.lock:
            workspace.calls += 1
            call = ToolUse(f"mcp-{workspace.calls}-{uuid.uuid4().hex[:8]}", name, dict(arguments or {}))
            result = self.catalog.execute(call, workspace.ctx)
            workspace.last_used = time.monotonic()
        return to_mcp(result)

    # -- sessions ------------------------------------------------------------------------------
    def _workspace(self, key: str) -> Workspace:
        with self._guard:
            self._require_open()
            found = self._sessions.get(key)
            if found is not None:
                return found
            if key not in self._handshakes and key not in self._opening:
                self._admit()
            self._opening.add(key)
            starting = self._starting.setdefault(key, threading.Lock())
        try:
            return self._started(key, starting)
        finally:
            with self._guard:
                self._opening.discard(key)

    def _started(self, key: str, starting: threading.Lock) -> Workspace:
        with starting:
            with self._guard:
                found = self._sessions.get(key)
            if found is not None:
                return found
            workspace = self._start(key)
            with self._guard:
                try:
                    self._require_open()
                except HarnessError:
                    workspace.close()
                    raise
                self._sessions[key] = workspace
            return workspace

    def _open_sessions(self) -> int:
        """Sessions counted against the cap (call under `_guard`)."""
        return len(set(self._sessions) | self._opening | self._handshakes) + self._admitting

    def _admit(self) -> None:
        """Room for one more session, else SessionsFull saying the cap, how many are open, how to raise it
        (call under `_guard`)."""
        open_now = self._open_sessions()
        if open_now >= self.max_sessions:
            raise SessionsFull(
                f"harness mcp: this new session was refused: {open_now} session(s) are open, the most this server "
                f"takes (--max-sessions {self.max_sessions}; each sandbox may hold {self.limits.memory} of memory). "
                f"End a session (the MCP client's DELETE, or --idle seconds without a call) and try again, or start "
                f"the server with a higher cap, e.g. harness mcp --dir {self.root} --http --max-sessions "
                f"{self.max_sessions * 2}", cap=self.max_sessions, open_now=open_now)

    def admit_handshake(self) -> None:
        """An HTTP `initialize` may open a session: reserve its place (SessionsFull if there is none);
        `settle_handshake` says what became of it."""
        with self._guard:
            self._admit()
            self._admitting += 1

    def settle_handshake(self, key: str | None) -> None:
        """The `initialize` reserved by `admit_handshake` opened session `key` (None: it opened none)."""
        with self._guard:
            self._admitting -= 1
            if key is not None:
                self._handshakes.add(key)

    def _require_open(self) -> None:
        if self._closed:
            raise HarnessError("the MCP server is shutting down")

    def _start(self, key: str) -> Workspace:
        workspace = self.pool.take()
        workspace.key = key
        self.say(f"session {workspace.ctx.session}: serving a client's session")
        return workspace

    def _signature(self) -> str:
        """What the folder holds, cheaply: the selected files' names, sizes, modification times and modes."""
        project = select_files(self.root, self.include)
        digest = hashlib.sha256()
        for rel in project.files:
            try:
                st = os.lstat(self.root / rel)
            except OSError:
                continue
            digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_mode}\n".encode("utf-8", "surrogateescape"))
        return digest.hexdigest()

    def _prepare(self) -> Workspace:
        """A sandbox holding the folder's files as they are now, started, with its baseline made."""
        session = f"mcp-{uuid.uuid4().hex[:8]}"
        self.say(f"session {session}: staging {self.root} and starting its sandbox")
        signature = self._signature()
        repo = repo_task(self.root, PROBLEM, python=self.python, include=self.include)
        for line in selection_lines(repo.project):
            self.say(f"session {session}: {line}")
        try:
            image = session_image(repo.task, self.config, progress=self.say)
            spec = SandboxSpec(image=image, session=session, project_dir=repo.staged,
                               limits=self.limits, labels={"harness.kind": "mcp"},
                               project_from_image=repo.task.environment is not None)
            box = DockerSandbox(spec)
            box.start()
        except BaseException:
            repo.cleanup()
            raise
        try:
            baseline = start_baseline(box)
        except BaseException:
            box.close()
            repo.cleanup()
            raise
        self.say(f"session {session}: sandbox ready")
        ctx = ToolContext(sandbox=box, session=session, approver=self.gate)
        if self.config.tools.prewarm_index:      # into the shared cache while the workspace waits for a client
            warm_index(ctx.code_index, repo.staged, self.config.tools)
        return Workspace("", signature, repo, box, baseline, ctx)

    def end(self, key: str, why: str = "the MCP client ended its session") -> None:
        """Remove `key`'s sandbox, if it has one (the session ended); a call of it waiting for an approval
        stops waiting, its request withdrawn saying `why`."""
        with self._guard:
            workspace = self._sessions.pop(key, None)
            self._handshakes.discard(key)
        if workspace is not None:
            self.say(f"session {workspace.ctx.session}: ended, removing its sandbox")
            self.gate.end(why, workspace.ctx.session)
            workspace.close()

    def end_idle(self, idle_seconds: float) -> None:
        now = time.monotonic()
        with self._guard:
            idle = [k for k, w in self._sessions.items() if now - w.last_used > idle_seconds and not w.lock.locked()]
        for key in idle:
            self.end(key, f"the MCP session was idle for {idle_seconds:g} s")

    def close(self, why: str = "the MCP server stopped") -> None:
        """Remove every sandbox (the server stops). Calls still running fail; none are waited for: a call
        waiting for an approval stops waiting and its request is withdrawn, saying `why` (else the
        process would wait, sandbox gone, for a decision nothing would act on)."""
        self.gate.end(why)
        with self._guard:
            self._closed = True
            workspaces, self._sessions = list(self._sessions.values()), {}
        self.pool.close()
        for workspace in workspaces:
            try:
                workspace.close()
            except Exception as exc:  # noqa: BLE001 - remove the others; the reaper catches what is left
                self.say(f"could not remove sandbox {workspace.ctx.session}: {exc}")

    def _of(self, ctx: ToolContext) -> Workspace:
        with self._guard:
            for workspace in self._sessions.values():
                if workspace.ctx.session == ctx.session:
                    return workspace
        raise ToolError("this session has no sandbox")

    # -- the patch out -------------------------------------------------------------------------
    def _patch(self, ctx: ToolContext) -> str:
        workspace = self._of(ctx)
        return sandbox_patch(workspace.box, workspace.baseline)

    def _propose_tool(self) -> Tool:
        def run(ctx: ToolContext) -> Observation:
            patch = self._patch(ctx)
            files = _files(patch)
            if not files:
                return Observation("no changes: /workspace holds the folder's files as the session found them",
                                   {"files": [], "patch": ""})
            text = (f"{len(files)} file(s) changed: {', '.join(files)}. Nothing was written outside the "
                    f"sandbox; `apply_changes` asks the operator to apply it to {self.root}.\n\n{patch}")
            return Observation(text, {"files": files, "patch": patch})

        parameters: dict[str, Any] = {"type": "object", "properties": {}, "required": [],
                                      "additionalProperties": False}
        return Tool(name="propose_changes", effect=Effect.READ, function=run, parameters=parameters,
                    output_schema=PATCH_SCHEMA,
                    description="Show the session's changes: the unified diff of /workspace against the files "
                                "as the session found them (caches left out). Changes nothing; use "
                                "`apply_changes` to have them written into the operator's folder.")

    def _apply_action(self) -> OutboundAction:
        def prepare(_args: dict[str, Any], ctx: ToolContext) -> Prepared:
            workspace = self._of(ctx)
            patch = sandbox_patch(workspace.box, workspace.baseline)
            if not _files(patch):
                raise ToolArgumentsError("apply_changes: there are no changes to apply; /workspace holds the "
                                         "folder's files as the session found them")
            binary = binary_changes(patch)
            if binary and not self.allow_binary:
                raise refusal(binary, str(self.root))
            with tempfile.TemporaryDirectory(prefix="harness-mcp-") as tmp:
                base = json.loads(write_base(Path(tmp), workspace.repo, patch).read_text(encoding="utf-8"))
            shown = [line for change in binary for line in ["", *describe_binary(workspace.box, change)]]
            preview = "\n".join([f"apply_changes: write this patch into {safe_text(str(self.root))} "
                                  f"({len(base['files'])} file(s), only if each is still as the session found it)",
                                  "", safe_text(shown_patch(patch)).rstrip("\n"), *shown])
            return Prepared({"folder": str(self.root), "patch": patch, "base": base}, preview)

        def execute(args: dict[str, Any], _ctx: ToolContext) -> str:
            if args.get("folder") != str(self.root):
                raise ToolError(f"not applied: request names the folder {safe_text(str(args.get('folder')))}, this "
                                f"server serves {safe_text(str(self.root))}")
            with tempfile.TemporaryDirectory(prefix="harness-mcp-") as tmp:
                run_dir = Path(tmp)
                checks.write_file(run_dir / "patch.diff", str(args["patch"]))
                checks.write_file(run_dir / "base.json", json.dumps(args["base"], indent=2) + "\n")
                try:
                    applied = apply_to_tree(load_run(run_dir, self.root))
                except PatchConflict as exc:
                    raise ToolError(f"not applied: {exc}") from exc
            return f"applied to {applied.repo}: {', '.join(applied.files)}"

        return OutboundAction(
            name="apply_changes", parameters={"type": "object", "properties": {}, "required": []},
            prepare=prepare, execute=execute, example={"key": "apply-1"},
            description="Write the session's changes (what `propose_changes` shows) into the operator's folder "
                        "on the host, after the operator approves the diff. Refused, with nothing written, "
                        "when a file it touches changed in the folder since the session started.")


def _files(patch: str) -> list[str]:
    return sorted({line.split(" b/", 1)[1] for line in patch.splitlines()
                   if line.startswith("diff --git ") and " b/" in line})


def to_mcp(result: ToolResult) -> types.CallToolResult:
    """Our tool result as MCP's: the observation text, `isError`, and the details as structured content."""
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.content)]
    if result.details is not None and not result.is_error:
        return types.CallToolResult(content=content, structured_content=result.details, is_error=False)
    return types.CallToolResult(content=content, is_error=result.is_error)


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
            return types.CallToolResult(content=[types.TextContent(type="text", text=safe_text(message))],
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
