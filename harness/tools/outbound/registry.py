"""Outbound tools: everything that leaves the sandbox. Held for approval, run once, from the host.

The types (`OutboundAction`, `Prepared`, `outbound_tool`) live in action.py; this module assembles a
session's outbound tools. Built-in actions live beside it: `http_request` in http_request.py,
`pip_download` in pip_download.py, `git_push` in git_push.py; their previews are built with preview.py
and operator credentials come from credentials.py.

Operators add their own through the entry-point group `harness.outbound_tools` (see
docs/approvals.md): an entry point names an `OutboundAction`, or a callable taking the `Config` and
returning one or a list of them.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from harness.config import Config
from harness.errors import ConfigError
from harness.tools.base import Tool
from harness.tools.outbound.action import OutboundAction, outbound_tool
from harness.tools.outbound.git_push import git_push_action
from harness.tools.outbound.http_request import http_request_action
from harness.tools.outbound.pip_download import pip_download_action

ENTRY_POINT_GROUP = "harness.outbound_tools"


def builtin_actions(config: Config) -> list[OutboundAction]:
    return [http_request_action(config), pip_download_action(config), git_push_action(config)]


def registered_actions(config: Config, group: str = ENTRY_POINT_GROUP) -> list[OutboundAction]:
    """Actions operators installed through the entry-point group, loaded in name order."""
    found: list[OutboundAction] = []
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin is a configuration error, said plainly
            raise ConfigError(f"cannot load outbound tool entry point {ep.name} = {ep.value} "
                              f"(group {group}): {type(exc).__name__}: {exc}") from exc
        made = obj if isinstance(obj, OutboundAction) else obj(config) if callable(obj) else obj
        items = made if isinstance(made, (list, tuple)) else [made]
        for item in items:
            if not isinstance(item, OutboundAction):
                raise ConfigError(f"entry point {ep.name} = {ep.value} gave {type(item).__name__}; expected "
                                  "harness.tools.outbound_action.OutboundAction (or a callable(config) returning it)")
            found.append(item)
    return found


def outbound_tools(config: Config, extra: list[OutboundAction] | None = None) -> list[Tool]:
    """Every outbound tool of a session: built-ins, registered ones, then `extra`; names unique."""
    actions = builtin_actions(config) + registered_actions(config) + list(extra or [])
    seen: dict[str, OutboundAction] = {}
    for action in actions:
        if action.name in seen:
            raise ConfigError(f"two outbound tools are named {action.name!r}; rename the operator-registered "
                              f"one (entry point group {ENTRY_POINT_GROUP})")
        seen[action.name] = action
    return [outbound_tool(a) for a in actions]
