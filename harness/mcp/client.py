"""MCP servers as tools of the agent loop, behind the approval gate (`--mcp NAME=COMMAND`).

    specs.parse_server("N=CMD")      a `ServerSpec`, or a ConfigError saying what is wrong (no SDK needed)
    McpServers(specs, ...)           starts each server (stdio, the official SDK's client) on a background
                                     event loop, lists its tools, and calls them with a timeout
    servers_for(config)              the process's connections for `config.mcp` (started once, closed
                                     at exit), shared by every session of a run or an evaluation
    McpServers.actions()             one `OutboundAction` per server tool, named `mcp_<server>_<tool>`
                                     (`harness.mcp.connect.mcp_actions(config)`: the same, and nothing
                                     imported when no server is configured)

A call to an external server leaves the sandbox: each is an outbound action, so it is previewed
(server, tool, arguments, escaped), decided by a policy rule (`tool = "mcp_time_*"`, or
`match = { server = "time" }`) or a human, and run once. Results come back as the observation text
with the structured content after it; `isError` results come back as errors. A server that crashed,
hangs past `mcp.call_timeout` or cannot be started gives a tool error naming it, never a stuck loop.
Servers get a minimal environment (the SDK's: PATH, HOME, ...), never the harness's API keys, and
their stderr goes to STATE_DIR/mcp-logs/NAME.log, not to the terminal.
"""

from __future__ import annotations

import atexit
import json
import math
import shlex
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from mcp import Client, StdioServerParameters
from mcp.client.client import _connect_transport
from mcp.client.stdio import stdio_client

from harness import checks
from harness.config import Config
from harness.errors import ConfigError, ToolError
from harness.mcp.specs import EXAMPLE, HINTS, ServerSpec, hint_ceiling, server_spec, tool_name
from harness.tools.base import ToolContext
from harness.tools.outbound.action import OutboundAction, Prepared
from harness.tools.outbound.preview import field_lines
from harness.tools.schema import regular_expressions, schema_problems
from sandbox.text import escape_ident, escape_output

MAX_RESULT_CHARS = 100_000
MAX_DESCRIPTION_CHARS = 2000


@dataclass
class _Connection:
    spec: ServerSpec
    client: Client
    tools: list[types.Tool]
    dead: str | None = None    # why its tools can no longer be called


class McpServers:
    """Connections to external MCP servers, driven on one background event loop (thread-safe calls)."""

    def __init__(self, specs: list[ServerSpec], *, log_dir: Path, call_timeout: float = 60.0,
                 start_timeout: float = 60.0, say: Callable[[str], None] = lambda _m: None) -> None:
        self.specs, self.log_dir, self.say = specs, log_dir, say
        self.call_timeout, self.start_timeout = call_timeout, start_timeout
        self.connections: dict[str, _Connection] = {}
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None

    def start(self) -> McpServers:
        self._portal = self._stack.enter_context(start_blocking_portal())
        try:
            for spec in self.specs:
                self.connections[spec.name] = self._connect(spec)
        except BaseException:
            self.close()
            raise
        return self

    def _connect(self, spec: ServerSpec) -> _Connection:
        assert self._portal is not None
        log = checks.private_dir(self.log_dir) / f"{spec.name}.log"
        errlog = self._stack.enter_context(open(log, "w", encoding="utf-8"))  # noqa: SIM115 - closed with the stack
        params = StdioServerParameters(command=spec.command[0], args=list(spec.command[1:]))
        client = Client(params, read_timeout_seconds=None)
        client._connect = _stdio_with_log(params, errlog)   # noqa: SLF001 - the server's stderr to its log file
        portal = self._portal
        try:
            stop = portal.call(anyio.Event)
            future, _ = portal.start_task(_hold, client, stop, self.start_timeout)
            self._stack.callback(_release, portal, stop, future)
            listed = portal.call(_list_tools, client, self.start_timeout)
        except Exception as exc:  # noqa: BLE001 - anything a server does wrong at start is said plainly
            errlog.flush()
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
            said = f"; it wrote: {escape_output(' | '.join(tail))[:600]}" if tail else ""
            raise ConfigError(f"MCP server {spec.name!r} ({escape_output(shlex.join(spec.command))}) "
                              "could not be started "
                              f"and asked for its tools: {_leaf(exc)}{said} (its stderr: {log}). Check that the "
                              f"command runs on its own, e.g. {EXAMPLE}") from exc
        self.say(f"MCP server {spec.name}: {len(listed)} tool(s): {', '.join(escape_ident(t.name) for t in listed)}")
        return _Connection(spec, client, listed)

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        conn = self.connections[server]
        if conn.dead:
            raise ToolError(f"MCP server {server!r} is not available: {conn.dead}; its tools cannot be called "
                            "for the rest of this run. Continue without them.")
        assert self._portal is not None
        try:
            result: types.CallToolResult = self._portal.call(_call_tool, conn.client, tool, arguments,
                                                             self.call_timeout)
            return result
        except TimeoutError as exc:
            raise ToolError(f"MCP server {server!r} did not answer {tool} within {self.call_timeout:g}s; the "
                            "call was abandoned (whether it took effect there is unknown)") from exc
        except Exception as exc:  # noqa: BLE001 - a crashed or broken server becomes a tool error
            conn.dead = f"the call to {tool} failed: {_leaf(exc)}"
            raise ToolError(f"MCP server {server!r} failed: {conn.dead}; see "
                            f"{self.log_dir / (server + '.log')}") from exc

    def actions(self) -> list[OutboundAction]:
        made: list[OutboundAction] = []
        seen: dict[str, str] = {}
        for conn in self.connections.values():
            for tool in conn.tools:
                action = self._action(conn.spec, tool)
                if action is None:
                    continue
                if action.name in seen:
                    raise ConfigError(f"MCP tools {seen[action.name]} and {conn.spec.name}/{tool.name} both become "
                                      f"{action.name!r}; rename one of the servers")
                seen[action.name] = f"{conn.spec.name}/{tool.name}"
                made.append(action)
        return made

    def _action(self, spec: ServerSpec, tool: types.Tool) -> OutboundAction | None:
        name = tool_name(spec.name, tool.name)
        schema = json.loads(json.dumps(tool.input_schema or {"type": "object"}))
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        why = _schema_refused(schema) or _output_schema_refused(tool.output_schema)
        if why:
            self.say(f"MCP server {spec.name}: tool {escape_ident(tool.name)} left out: {escape_output(why)}")
            return None
        description = (tool.description or tool.title or tool.name)[:MAX_DESCRIPTION_CHARS]
        server, remote, hints = spec.name, tool.name, tool_hints(tool)

        def prepare(args: dict[str, Any], _ctx: ToolContext) -> Prepared:
            shown = json.dumps(args, indent=2, ensure_ascii=False, sort_keys=True)
            request = {"server": server, "tool": remote, "arguments": args, "hints": hints,
                       "server_trusted": spec.trusted}
            lines = field_lines([("MCP server", f"{server} ({escape_output(shlex.join(spec.command))})"),
                                 ("tool", escape_ident(remote)), *hint_lines(name, request)])
            return Prepared(request,
                            "\n".join([*lines, "arguments:", *("  " + ln for ln in escape_output(shown).split("\n"))]))

        def execute(args: dict[str, Any], _ctx: ToolContext) -> str:
            result = self.call(server, remote, dict(args["arguments"]))
            text = result_text(result)
            if result.is_error:
                raise ToolError(f"{remote} on MCP server {server!r} reported an error: {text}")
            return text

        return OutboundAction(name=name, parameters=schema, prepare=prepare, execute=execute,
                              description=f"[{spec.name}, an MCP server outside the sandbox] {description}")

    def close(self) -> None:
        try:
            self._stack.close()
        except Exception as exc:  # noqa: BLE001 - a server that will not stop is killed with the portal
            self.say(f"closing MCP servers: {type(exc).__name__}: {exc}")
        self.connections.clear()


def tool_hints(tool: types.Tool) -> dict[str, bool | None]:
    """The tool's annotations by their MCP names (None: not given), as the request records them."""
    given = tool.annotations
    values = (None,) * len(HINTS) if given is None else (
        given.read_only_hint, given.destructive_hint, given.idempotent_hint, given.open_world_hint)
    return {name: value if isinstance(value, bool) else None for name, value in zip(HINTS, values, strict=True)}


def hint_lines(name: str, request: dict[str, Any]) -> list[tuple[str, str]]:
    """What the person deciding reads about the hints: each one, the server's trust, and what they allow."""
    hints = request["hints"]
    shown = ", ".join(f"{h}={'unset' if v is None else str(v).lower()}" for h, v in hints.items())
    trusted = "trusted (--mcp-trust)" if request["server_trusted"] else "not trusted: its hints cannot skip a prompt"
    ceiling = hint_ceiling(name, request)
    verdict = (f"a person decides: {ceiling}" if ceiling
               else "read-only on a trusted server: a policy rule may approve it")
    return [("hints", shown), ("server is", trusted), ("so", escape_output(verdict))]


def _schema_refused(schema: dict[str, Any]) -> str | None:
    """Why a server tool's input schema cannot be offered to the model, or None. Checked once, here, so
    that validating the model's arguments later is bounded in time (`harness.tools.schema`)."""
    bounded = schema_problems(schema)
    if bounded:
        return "its input schema cannot be validated in bounded time: " + "; ".join(bounded)
    if schema.get("type") != "object":
        return "its input schema is not an object"
    if not isinstance(schema.get("properties"), dict):
        return "its input schema's properties are not an object"
    if "key" in schema["properties"]:
        return "it takes an argument named `key`, which the approval gate reserves for idempotency keys"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is not valid JSON Schema ({exc.message})"
    return None


def _output_schema_refused(schema: dict[str, Any] | None) -> str | None:
    """Why a tool's output schema is refused, or None. The SDK's client checks every result against it
    with jsonschema, whose `pattern` runs on Python's backtracking `re` (unbounded in time, and not
    ours to change), so an output schema may hold no regular expression at all."""
    if schema is None:
        return None
    bounded = schema_problems(schema)
    if bounded:
        return "its output schema cannot be validated in bounded time: " + "; ".join(bounded)
    patterns = sorted(regular_expressions(schema))
    if patterns:
        return (f"its output schema holds regular expressions ({', '.join(json.dumps(p) for p in patterns[:3])}), "
                "which the MCP client would check results against with Python's backtracking `re`, unbounded "
                "in time")
    return None


def _leaf(exc: BaseException) -> str:
    """The innermost error of an exception group (anyio's task groups wrap what actually went wrong)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[-1]
    if "Connection closed" in str(exc):
        return "the server closed its end of the connection before answering (it exited or crashed)"
    return f"{type(exc).__name__}: {escape_output(str(exc))[:500]}"


def _stdio_with_log(params: StdioServerParameters, errlog: Any) -> Any:
    return _connect_transport(stdio_client(params, errlog=errlog))


async def _hold(client: Client, stop: anyio.Event, seconds: float, *,
                task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Keep `client` connected until `stop` is set; connecting must take under `seconds`. The client lives
    in this one task (its task groups are entered and left here), so calls from any thread are safe."""
    with anyio.CancelScope(deadline=anyio.current_time() + seconds) as scope:
        async with client:
            scope.deadline = math.inf
            task_status.started()
            await stop.wait()
    if scope.cancelled_caught:
        raise TimeoutError(f"the server did not finish starting within {seconds:g}s")


def _release(portal: BlockingPortal, stop: anyio.Event, future: Any) -> None:
    portal.call(stop.set)
    try:
        future.result(timeout=15)
    except Exception:  # noqa: BLE001 - the server is going away; the portal's end cancels what is left
        pass


async def _list_tools(client: Client, seconds: float) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor = None
    with anyio.fail_after(seconds):
        for _page in range(100):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
    return tools


async def _call_tool(client: Client, tool: str, arguments: dict[str, Any], seconds: float) -> types.CallToolResult:
    with anyio.fail_after(seconds):
        return await client.call_tool(tool, arguments)


def result_text(result: types.CallToolResult) -> str:
    """An MCP result as observation text: its text blocks, other blocks named, structured content after."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content, not shown]")
    if result.structured_content is not None:
        parts.append("structured content: " + json.dumps(result.structured_content, ensure_ascii=False,
                                                          sort_keys=True))
    text = escape_output("\n".join(parts)) or "(the tool returned no content)"
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[... {len(text) - MAX_RESULT_CHARS} more characters not shown]"
    return text


_PROCESS: dict[tuple[tuple[str, tuple[str, ...], bool], ...], McpServers] = {}
_LOCK = threading.Lock()


def servers_for(config: Config, say: Callable[[str], None] = lambda _m: None) -> McpServers | None:
    """The started servers of `config.mcp` (None when it names none), shared by the whole process."""
    specs = [server_spec(name, command, trusted=name in config.mcp.trusted)
             for name, command in sorted(config.mcp.servers.items())]
    if not specs:
        return None
    key = tuple((s.name, s.command, s.trusted) for s in specs)
    with _LOCK:
        found = _PROCESS.get(key)
        if found is None:
            found = McpServers(specs, log_dir=config.approval.state_dir / "mcp-logs",
                               call_timeout=config.mcp.call_timeout, start_timeout=config.mcp.start_timeout,
                               say=say).start()
            _PROCESS[key] = found
        return found


@atexit.register
def close_all() -> None:
    with _LOCK:
        for servers in _PROCESS.values():
            servers.close()
        _PROCESS.clear()
