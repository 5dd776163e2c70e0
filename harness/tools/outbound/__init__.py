"""Actions that leave the sandbox (HTTP, package download, git push): each is an `OutboundAction` the
approval gate holds until it is decided, then runs exactly once on the host. `preview` renders what a
person approves; `credentials` holds the operator's headers (never the model's); `registry` lists the
built-in actions and those other packages register under the `harness.outbound_tools` entry point."""

from harness.tools.outbound.action import OutboundAction, Prepared, outbound_tool
from harness.tools.outbound.registry import ENTRY_POINT_GROUP, builtin_actions, outbound_tools

__all__ = ["ENTRY_POINT_GROUP", "OutboundAction", "Prepared", "builtin_actions", "outbound_tool", "outbound_tools"]
