"""Outbound tools: everything that leaves the sandbox. Held for approval, run once, from the host.

An outbound action is two functions: `prepare(args, ctx) -> Prepared` resolves the model's call into
the exact arguments that will run and the preview a human judges (it may read the sandbox, never
send anything model-chosen); `execute(args, ctx) -> str` runs those stored arguments from the host
and returns the observation. `outbound_tool(action)` turns it into a `Tool` with effect `outbound`
whose function hands the call to the session's approver (`harness.approval.gate.ApprovalGate`), so
every outbound tool, built-in or not, gets the same guarantees: approval, idempotency key, exactly once.

Operators add their own through the entry-point group `harness.outbound_tools` (see
docs/approvals.md): an entry point names an `OutboundAction`, or a callable taking the `Config` and
returning one or a list of them.

Built-in actions live beside this module: `http_request` here, `pip_download` in outbound_pip.py,
`git_push` in outbound_git.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Callable

from harness.errors import ApprovalError, ConfigError
from harness.tools.base import Effect, Tool, ToolContext

if TYPE_CHECKING:
    from harness.config import Config

ENTRY_POINT_GROUP = "harness.outbound_tools"
KEY_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 200,
              "description": "Idempotency key naming this action. Repeating a call with the same key never "
                             "runs it twice: you get the stored result. Use a new key for a new action. "
                             "Default: the id of this tool call."}
KEY_NOTE = ("\n\nThis action leaves the sandbox: it is held until a human (or the operator's policy) approves "
            "it, then the harness runs it once from the host and returns the result. A denial comes back "
            "as an error with the reason; do not repeat a denied request.")


@dataclass(frozen=True)
class Prepared:
    args: dict[str, Any]     # exactly what will run (JSON-serialisable); hashed when approved
    preview: str             # what the human reads; model-given text already passed through safe_text


@dataclass(frozen=True)
class OutboundAction:
    name: str
    description: str
    parameters: dict[str, Any]          # JSON Schema of the model's arguments, without `key`
    prepare: Callable[[dict[str, Any], ToolContext], Prepared]
    execute: Callable[[dict[str, Any], ToolContext], str]
    example: dict[str, Any] | None = None


def outbound_tool(action: OutboundAction) -> Tool:
    """The Tool the model calls: the action's schema plus `key`, effect outbound, run via the approver."""
    params = copy.deepcopy(action.parameters)
    params.setdefault("properties", {})["key"] = KEY_SCHEMA
    params["additionalProperties"] = False

    def function(ctx: ToolContext, **arguments: Any) -> str:
        approver = ctx.services.get("approver")
        if approver is None:
            raise ApprovalError(f"outbound tool {action.name!r} was called in a session without an approver; "
                                "add the services of harness.approval.wiring.outbound_tools_for_session "
                                "to ToolContext.services")
        return str(approver.run(action, arguments, ctx))

    return Tool(name=action.name, description=action.description + KEY_NOTE, parameters=params,
                effect=Effect.OUTBOUND, function=function, example=action.example)


def builtin_actions(config: "Config") -> list[OutboundAction]:
    from harness.tools.outbound_git import git_push_action
    from harness.tools.outbound_http import http_request_action
    from harness.tools.outbound_pip import pip_download_action
    return [http_request_action(config), pip_download_action(config), git_push_action(config)]


def registered_actions(config: "Config", group: str = ENTRY_POINT_GROUP) -> list[OutboundAction]:
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
                                  "harness.tools.outbound.OutboundAction (or a callable(config) returning it)")
            found.append(item)
    return found


def outbound_tools(config: "Config", extra: list[OutboundAction] | None = None) -> list[Tool]:
    """Every outbound tool of a session: built-ins, registered ones, then `extra`; names unique."""
    actions = builtin_actions(config) + registered_actions(config) + list(extra or [])
    seen: dict[str, OutboundAction] = {}
    for action in actions:
        if action.name in seen:
            raise ConfigError(f"two outbound tools are named {action.name!r}; rename the operator-registered "
                              f"one (entry point group {ENTRY_POINT_GROUP})")
        seen[action.name] = action
    return [outbound_tool(a) for a in actions]
