"""What can be known of MCP servers without the SDK: their specs (`--mcp NAME=COMMAND`), the names their
tools get, the hints a policy reads, and an MCP session's limits. It imports nothing of the SDK and
nothing of `harness.mcp.client` (which imports this module): the entry points that start the SDK only
when servers are configured are in `harness.mcp.connect`."""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError
from sandbox.api import Limits

IDLE_SECONDS = 1800.0
"""`harness mcp --http`: a session's sandbox is removed after this long without a call."""

MAX_SESSIONS = 4
"""`harness mcp --http`: how many sessions may be open at once (`--max-sessions`); the next is refused."""
SESSION_MEMORY = "1g"
"""`harness mcp`: the memory of each session's sandbox (`--memory`), its tmpfs mounts included."""
MIN_SESSION_MEMORY = 256 << 20
SIZE = re.compile(r"([1-9][0-9]{0,6})([kmg])", re.IGNORECASE)


def session_limits(base: Limits, memory: str = SESSION_MEMORY) -> Limits:
    """The limits of an MCP session's sandbox: `base` (the configured ones) with `memory`, and the tmpfs
    mounts, which count against it, sized from it: /workspace a half, /tmp a quarter, the home 1/16. A
    client filling every mount holds at most `memory` of the host's memory, so a server holds at most
    (max sessions + pool) x `memory`."""
    found = SIZE.fullmatch(memory.strip())
    total = int(found.group(1)) << {"k": 10, "m": 20, "g": 30}[found.group(2).lower()] if found else 0
    if total < MIN_SESSION_MEMORY:
        raise ConfigError(f"--memory {memory!r} is not a size of at least 256m for a session's sandbox; expected "
                          "a number and k, m or g, e.g. --memory 1g")
    return dataclasses.replace(base, memory=memory, workspace_size=f"{total // 2 >> 20}m",
                               tmp_size=f"{total // 4 >> 20}m", home_size=f"{max(16, total // 16 >> 20)}m")


NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
EXAMPLE = "--mcp time='.venv/bin/python -m mcp_server_time'"


@dataclass(frozen=True)
class ServerSpec:
    name: str
    command: tuple[str, ...]
    trusted: bool = False     # `--mcp-trust NAME`: the operator believes its tools' read-only hints


HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The MCP tool annotations (`ToolAnnotations` of the SDK's types) a call's request records as `hints`."""


def hint_ceiling(tool: str, args: Mapping[str, Any]) -> str | None:
    """Why an MCP tool's call may not be approved by a policy rule (it asks a person), or None when the
    operator's rules may approve it: only a tool marked read-only and not open-world (`openWorldHint`
    false: the MCP default is true) and not destructive, on a server the operator trusts. Hints only ever
    ask more: a server that is not trusted, or a tool without hints, never skips a prompt. `args` is the
    request as it runs (`server`, `tool`, `arguments`, `hints`, `server_trusted`); tools not named
    `mcp_*` are not MCP tools and get None."""
    if not tool.startswith("mcp_"):
        return None
    hints = args.get("hints")
    server = args.get("server")
    if not isinstance(hints, Mapping) or all(hints.get(h) is None for h in HINTS):
        return f"MCP tool {tool} has no annotations (readOnlyHint, destructiveHint, openWorldHint)"
    if hints.get("destructiveHint") is True:
        return f"MCP tool {tool} is marked destructive (destructiveHint)"
    if hints.get("openWorldHint") is not False:
        said = "marked" if hints.get("openWorldHint") is True else "by the MCP default, without openWorldHint: false"
        return f"MCP tool {tool} reaches an open world ({said})"
    if hints.get("readOnlyHint") is not True:
        return f"MCP tool {tool} is not marked read-only (readOnlyHint)"
    if args.get("server_trusted") is not True:
        return (f"MCP server {server!r} is not trusted (--mcp-trust {server}), so its hints cannot skip a "
                "prompt")
    return None


def parse_server(text: str, where: str = "--mcp") -> ServerSpec:
    name, sep, command = text.partition("=")
    if not sep or not command.strip():
        raise ConfigError(f"{where} {text!r} is not NAME=COMMAND; e.g. {EXAMPLE}")
    return server_spec(name.strip(), command, where)


def server_spec(name: str, command: str, where: str = "mcp.servers", trusted: bool = False) -> ServerSpec:
    if not NAME.fullmatch(name):
        raise ConfigError(f"{where}: server name {name!r} is not a name; expected a letter then up to 31 letters, "
                          f"digits, '_' or '-', e.g. {EXAMPLE}")
    try:
        words = tuple(shlex.split(command))
    except ValueError as exc:
        raise ConfigError(f"{where}: the command of server {name!r} cannot be split into words ({exc}): "
                          f"{command!r}; e.g. {EXAMPLE}") from exc
    if not words:
        raise ConfigError(f"{where}: server {name!r} has an empty command; e.g. {EXAMPLE}")
    return ServerSpec(name, words, trusted)


def tool_name(server: str, tool: str) -> str:
    """The name the model calls: `mcp_<server>_<tool>`, in the characters every provider accepts."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp_{server}_{tool}")[:64]
