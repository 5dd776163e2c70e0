"""MCP both ways: the sandbox as an MCP server (`server`) and MCP servers as outbound tools (`client`)."""

from typing import TYPE_CHECKING

from sandbox.surface import lazy_names

__all__ = [
    "hint_ceiling", "IDLE_SECONDS", "MAX_SESSIONS", "mcp_actions", "parse_server", "SandboxService",
    "serve_http", "serve_stdio", "session_limits", "SESSION_MEMORY", "start_servers", "write_token",
]


# Names other packages use, loaded on first use: importing the package costs nothing (sandbox.surface).
if TYPE_CHECKING:
    from harness.mcp.connect import mcp_actions, start_servers
    from harness.mcp.http_guard import write_token
    from harness.mcp.server import SandboxService, serve_http, serve_stdio
    from harness.mcp.specs import IDLE_SECONDS, MAX_SESSIONS, SESSION_MEMORY, hint_ceiling, parse_server, session_limits

__getattr__ = lazy_names(__name__, {
    "harness.mcp.connect": ("mcp_actions", "start_servers"),
    "harness.mcp.http_guard": ("write_token",),
    "harness.mcp.server": ("SandboxService", "serve_http", "serve_stdio"),
    "harness.mcp.specs": ("IDLE_SECONDS", "MAX_SESSIONS", "SESSION_MEMORY", "hint_ceiling", "parse_server",
                          "session_limits"),
})
