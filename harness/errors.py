"""The harness's exceptions. Two families, kept apart:

    ToolError                       the model's problem: becomes a tool_result with is_error=True
    ├── ToolArgumentsError          the call does not match the tool's schema (every violation listed)
    ├── UnknownToolError            no tool has that name (the message lists the tools that exist)
    ├── PathError                   a path outside the workspace, `..`, a symlink leading out
    ├── EditError                   anchor missing/ambiguous, hunk mismatch, stale fingerprint, lint
    ├── ApprovalDenied              a human or a policy refused an outbound action
    └── ChannelLost                 the sandbox's channel died during the call (restarted; outcome unknown)

    HarnessError                    ours: stops the run loudly (never shown to the model as a result)
    ├── ConfigError                 bad configuration or command-line input
    ├── TaskError                   a task directory or instance is malformed
    ├── ModelError                  the model API failed after retries, or answered nonsense
    │   └── ModelTruncated          the response was cut by max_tokens (never executed)
    ├── ScriptExhausted             a scripted model ran out of turns
    ├── ApprovalError               the approval queue itself failed (database, web page)
    │   ├── UnknownRequest          no request has that id (harness.approval.records; `.request_id`)
    │   └── DecisionRefused         already decided, changed since shown, or approved unseen (`.why`)
    └── UnsafePathError             a host path crosses a link or leaves its root (refused, never followed)

Sandbox failures are `sandbox.errors.SandboxError` and belong to the second family too.
Every message says what happened, the value that caused it, what was expected and an example.
"""

from __future__ import annotations


class ToolError(Exception):
    """An error the model sees as an observation; the run goes on."""


class ToolArgumentsError(ToolError):
    pass


class UnknownToolError(ToolError):
    pass


class PathError(ToolError):
    pass


class EditError(ToolError):
    pass


class ApprovalDenied(ToolError):
    pass


class ChannelLost(ToolError):
    pass


class HarnessError(Exception):
    """An error of the harness or its inputs; it ends the run and is reported to the operator."""


class ConfigError(HarnessError):
    pass


class TaskError(HarnessError):
    pass


class ModelError(HarnessError):
    pass


class ModelTruncated(ModelError):
    """`partial` is the cut response's text and `tokens` its (input, output) token counts, for a caller
    that can use a complete part of it (ReAct keeps a complete first Action)."""

    def __init__(self, message: str, partial: str = "", tokens: tuple[int, int] = (0, 0)) -> None:
        super().__init__(message)
        self.partial, self.tokens = partial, tokens


class ScriptExhausted(ModelError):
    pass


class ApprovalError(HarnessError):
    pass


class UnsafePathError(HarnessError):
    pass
