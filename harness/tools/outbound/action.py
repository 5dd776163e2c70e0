"""An outbound action and the tool made from it: the types every outbound tool, built-in or not, uses.

An outbound action is two functions: `prepare(args, ctx) -> Prepared` resolves the model's call into
the exact arguments that will run and the preview a human judges (it may read the sandbox, never
send anything model-chosen); `execute(args, ctx) -> str` runs those stored arguments from the host
and returns the observation. `outbound_tool(action)` turns it into a `Tool` with effect `outbound`
whose function hands the call to the session's approver (`harness.approval.gate.ApprovalGate`), so
every outbound tool gets the same guarantees: approval, idempotency key, exactly once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.errors import ApprovalError
from harness.tools.base import Effect, Tool, ToolContext, key_schema

KEY_SCHEMA = key_schema("Idempotency key naming this action. Repeating a call with the same key never runs it "
                        "twice: you get the stored result. Use a new key for a new action. Default: the id of "
                        "this tool call.")
KEY_NOTE = ("\n\nThis action leaves the sandbox: it is held until a human (or the operator's policy) approves "
            "it, then the harness runs it once from the host and returns the result. A denial comes back "
            "as an error with the reason; do not repeat a denied request.")


@dataclass(frozen=True)
class Prepared:
    args: dict[str, Any]     # exactly what will run (JSON-serialisable); hashed when approved
    preview: str             # what the human reads; model-given text already passed through escape_unsafe
    # names in `args` that record what the host observed when preparing (git_push: the remote's tip), not
    # what the action is: a repeat of the key is compared on the other arguments only
    observed: tuple[str, ...] = ()


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
        if ctx.approver is None:
            raise ApprovalError(f"outbound tool {action.name!r} was called in a session without an approver; "
                                "give harness.agent.open_workspace the gate of harness.approval.wiring.make_gate")
        return ctx.approver.run(action, arguments, ctx)

    return Tool(name=action.name, description=action.description + KEY_NOTE, parameters=params,
                effect=Effect.OUTBOUND, function=function, example=action.example)
