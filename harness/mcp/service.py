"""The tools an MCP client sees and the sandboxes of its sessions (what `harness mcp` serves; the
transports are in `harness.mcp.server`).

    SandboxService(root, config, approve=..., python=...)
        One workspace per MCP session (`harness.agent.assembly.open_workspace`: the sandbox, its baseline and
        context a `harness run --repo` session gets), holding the folder's files (selected and with its
        environment resolved as `harness run --repo` does), started on the session's first tool call,
        or taken from a warm pool of them, and removed when the session ends. The cap counts every
        session, with a sandbox or still opening, and refuses the next with `SessionsFull`.
    to_mcp(result)                 our tool result as MCP's `CallToolResult`

The catalog is a session's (`harness.agent.assembly.session_catalog`: bash, view, search, find_code, edit,
apply_patch, write and the outbound tools) with the same schemas, idempotency keys and compare-and-swap,
plus `propose_changes` and `apply_changes` (`harness.mcp.changes`). The folder on the host is only read
until an `apply_changes` is approved.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types

from harness.agent.assembly import (
    Workspace,
    new_session_name,
    open_workspace,
    session_catalog,
    session_image,
    task_spec,
)
from harness.agent.inplace import RepoTask, repo_task, selection_lines
from harness.approval.gate import ApprovalGate
from harness.approval.wiring import make_gate
from harness.config import Config
from harness.core.project import select_files
from harness.errors import HarnessError, TaskError, ToolError, UnknownToolError
from harness.mcp.changes import apply_action, propose_tool
from harness.mcp.http_guard import SessionsFull
from harness.mcp.specs import MAX_SESSIONS, session_limits
from harness.messages import ToolResult, ToolUse
from harness.tools.base import Effect, ToolContext, error_kind
from harness.tools.catalog import Catalog, unknown_tool_message
from harness.tools.outbound.action import outbound_tool
from harness.tools.retrieval.find_code import warm_index
from sandbox.api import Limits
from sandbox.pool import WarmPool
from sandbox.text import escape_unsafe

PROBLEM = "(an MCP client's session: no problem statement)"


@dataclass
class McpSession:
    """One MCP session's workspace and the state its tool calls share."""

    key: str
    signature: str             # the folder's selection (names, sizes, times) when its files were staged
    repo: RepoTask
    workspace: Workspace
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    calls: int = 0

    @property
    def ctx(self) -> ToolContext:
        return self.workspace.context

    def close(self) -> None:
        try:
            self.workspace.close()
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
        # a session's catalog, without the tools of `config.mcp`'s servers (this server does not relay them)
        extra = [propose_tool(self._of, self.root), outbound_tool(apply_action(self._of, self.root, allow_binary))]
        self.catalog: Catalog = session_catalog(config, extra, servers=False)
        self._sessions: dict[str, McpSession] = {}
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
        self.pool: WarmPool[McpSession] = self._make_pool(0)   # `begin` starts the real one

    def _make_pool(self, size: int) -> WarmPool[McpSession]:
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
        if name not in self.catalog.tools:   # answered as the catalog answers it, without starting a sandbox
            unknown = UnknownToolError(unknown_tool_message(name, list(self.catalog.tools)))
            return to_mcp(ToolResult(f"mcp-{uuid.uuid4().hex[:12]}", str(unknown), is_error=True,
                                     error_kind=error_kind(unknown)))
        try:
            held = self._session(session)
        except SessionsFull as exc:
            self.say(str(exc))
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)
        with held.lock:
            held.calls += 1
            call = ToolUse(f"mcp-{held.calls}-{uuid.uuid4().hex[:8]}", name, dict(arguments or {}))
            result = held.workspace.execute(call)
            held.last_used = time.monotonic()
        return to_mcp(result)

    # -- sessions ------------------------------------------------------------------------------
    def _session(self, key: str) -> McpSession:
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

    def _started(self, key: str, starting: threading.Lock) -> McpSession:
        with starting:
            with self._guard:
                found = self._sessions.get(key)
            if found is not None:
                return found
            held = self._start(key)
            with self._guard:
                try:
                    self._require_open()
                except HarnessError:
                    held.close()
                    raise
                self._sessions[key] = held
            return held

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

    def _start(self, key: str) -> McpSession:
        held = self.pool.take()
        held.key = key
        self.say(f"session {held.ctx.session}: serving a client's session")
        return held

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

    def _prepare(self) -> McpSession:
        """The workspace of a session: the folder's files as they are now, started, with its baseline made."""
        session = new_session_name("mcp")
        self.say(f"session {session}: staging {self.root} and starting its sandbox")
        signature = self._signature()
        repo = repo_task(self.root, PROBLEM, python=self.python, include=self.include)
        for line in selection_lines(repo.project):
            self.say(f"session {session}: {line}")
        try:
            image = session_image(repo.task, self.config, progress=self.say)
            spec = task_spec(repo.task, image, self.limits, "mcp", session)
            workspace = open_workspace(spec, self.config, self.gate, catalog=self.catalog)
        except BaseException:
            repo.cleanup()
            raise
        self.say(f"session {session}: sandbox ready")
        if self.config.tools.prewarm_index:      # into the shared cache while the workspace waits for a client
            warm_index(workspace.context.code_index, repo.staged, self.config.tools)
        return McpSession("", signature, repo, workspace)

    def end(self, key: str, why: str = "the MCP client ended its session") -> None:
        """Remove `key`'s sandbox, if it has one (the session ended); a call of it waiting for an approval
        stops waiting, its request withdrawn saying `why`."""
        with self._guard:
            held = self._sessions.pop(key, None)
            self._handshakes.discard(key)
        if held is not None:
            self.say(f"session {held.ctx.session}: ended, removing its sandbox")
            self.gate.end(why, held.ctx.session)
            held.close()

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
            sessions, self._sessions = list(self._sessions.values()), {}
        self.pool.close()
        for held in sessions:
            try:
                held.close()
            except Exception as exc:  # noqa: BLE001 - remove the others; the reaper catches what is left
                self.say(f"could not remove sandbox {held.ctx.session}: {exc}")

    def _of(self, ctx: ToolContext) -> tuple[Workspace, RepoTask]:
        """The workspace and staged folder of the session `ctx` belongs to (the patch tools' lookup)."""
        with self._guard:
            for held in self._sessions.values():
                if held.ctx.session == ctx.session:
                    return held.workspace, held.repo
        raise ToolError("this session has no sandbox")


def to_mcp(result: ToolResult) -> types.CallToolResult:
    """Our tool result as MCP's: the observation text, `isError`, and the details as structured content."""
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.content)]
    if result.details is not None and not result.is_error:
        return types.CallToolResult(content=content, structured_content=result.details, is_error=False)
    return types.CallToolResult(content=content, is_error=result.is_error)


