"""Reference models for evaluation: `GoldModel` replays a task's gold patch, `EmptyModel` does nothing.

They go through the same loop, sandbox and tools as a real model, so `harness eval --model gold`
checks the whole pipeline (environment, tools, patch extraction, grading) on every task: gold must be
resolved, empty must not. GoldModel's turns, decided from the transcript so far (so a resumed session
goes on correctly):

1. `view` every existing file the patch changes (the edit tools only change files viewed in the
   session);
2. `apply_patch` with the whole gold patch;
3. end with a short text saying whether the patch was applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.core.sources import patched_files
from harness.errors import ModelError, TaskError
from harness.messages import Message, TextBlock, ToolUse
from harness.models.base import ModelResponse, Usage


def _existing_files(patch: str) -> list[str]:
    """Files the patch modifies or deletes (those it creates need no viewing)."""
    try:
        return patched_files(patch, existing_only=True)
    except TaskError as exc:
        raise ModelError(f"the gold patch is {exc}; check it with `harness tasks check`") from exc


class GoldModel:
    """Applies `patch` through the `view` and `apply_patch` tools, then ends."""

    def __init__(self, patch: str, name: str = "gold") -> None:
        self.name = name
        self.patch = patch
        self.files = _existing_files(patch)

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        names = {t.get("name") for t in tools}
        for needed in ("view", "apply_patch"):
            if needed not in names:
                raise ModelError(f"the gold model needs the {needed!r} tool and the catalog has "
                                 f"{sorted(n for n in names if n)}")
        step = sum(1 for m in messages if m.role == "assistant")
        if step == 0 and self.files:
            calls = tuple(ToolUse(id=f"gold-view-{i}", name="view", input={"path": path})
                          for i, path in enumerate(self.files))
            return self._reply(calls)
        if not any(u.name == "apply_patch" for m in messages for u in m.tool_uses):
            return self._reply((ToolUse(id="gold-apply", name="apply_patch", input={"patch": self.patch}),))
        result = next((r for m in reversed(messages) for r in m.tool_results
                       if r.tool_use_id == "gold-apply"), None)
        if result is not None and result.is_error:
            text = f"The gold patch could not be applied:\n{result.content}"
        else:
            text = "Applied the reference patch."
        return ModelResponse(Message("assistant", (TextBlock(text),)), "end_turn", Usage())

    @staticmethod
    def _reply(calls: tuple[ToolUse, ...]) -> ModelResponse:
        return ModelResponse(Message("assistant", calls), "tool_use", Usage())


class EmptyModel:
    """Makes no change: ends on its first turn."""

    name = "empty"

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        return ModelResponse(Message("assistant", (TextBlock("No change."),)), "end_turn", Usage())
