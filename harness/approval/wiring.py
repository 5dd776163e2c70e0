"""How a session gets its outbound tools and the approver they report to (placeholder: none yet)."""

from __future__ import annotations

from typing import Any

from harness.config import Config
from harness.tools.base import Tool


def outbound_tools_for_session(config: Config, session: str, mode: str) -> tuple[list[Tool], dict[str, Any]]:
    """The outbound tools of a session and the services (e.g. "approver") they need in ToolContext."""
    return [], {}
