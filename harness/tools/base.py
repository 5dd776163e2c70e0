"""What a tool is: data plus a function.

A `Tool` has a name, a description written for a newly arrived colleague, a JSON Schema for its
arguments (with `required` and `additionalProperties: false`), an effect class the approval policy
reads, and the function that runs it. The function receives a `ToolContext` and the validated
arguments, returns the observation text, and raises `harness.errors.ToolError` for anything the
model should read as an error observation.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from sandbox.api import Sandbox


class Effect(str, enum.Enum):
    READ = "read"            # looks, changes nothing
    SANDBOX = "sandbox"      # changes things inside the sandbox only
    OUTBOUND = "outbound"    # leaves the sandbox: held for approval, run once by the host


@dataclass
class ToolContext:
    """What a tool call can reach. One per session; `tool_use_id` is set per call."""

    sandbox: "Sandbox"
    session: str
    tool_use_id: str = ""
    services: dict[str, Any] = field(default_factory=dict)   # e.g. "approver", "edit_state"


ToolFunction = Callable[..., str]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    effect: Effect
    function: ToolFunction
    example: dict[str, Any] | None = None   # a correct call, quoted in argument-error messages

    def spec(self) -> dict[str, Any]:
        """The definition sent to the model (provider adapters map it to their own shape)."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}
