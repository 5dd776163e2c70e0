"""The entry points to the configured MCP servers, which import the SDK (`harness.mcp.client`) only
when servers are configured: importing it costs about half a second, which every `harness` command
would otherwise pay at start.

    start_servers(config)    start `config.mcp`'s servers now, so one that cannot start fails early
    mcp_actions(config)      one outbound action per server tool ([] without servers)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.config import Config

if TYPE_CHECKING:
    from harness.tools.outbound.action import OutboundAction


def start_servers(config: Config, say: Callable[[str], None] = lambda _m: None) -> None:
    """Start `config.mcp`'s servers now (once per process), so that one that cannot start fails the run
    before any work; nothing is imported when there are none."""
    if config.mcp.servers:
        from harness.mcp.client import servers_for  # noqa: PLC0415 - the SDK is imported only when used
        servers_for(config, say)


def mcp_actions(config: Config) -> list[OutboundAction]:
    """One outbound action per tool of `config.mcp`'s servers (started on first use); [] without servers."""
    if not config.mcp.servers:
        return []
    from harness.mcp.client import servers_for  # noqa: PLC0415 - the SDK is imported only when used
    servers = servers_for(config)
    return servers.actions() if servers is not None else []
