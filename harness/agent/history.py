"""The history window: only the last `keep` tool observations stay whole in the model's context.

Older observations are replaced by one line that says which call produced them, whether it
failed, how long they were and that the call can be repeated. The trajectory on disk keeps
everything; this only shapes what the model reads. Every tool_use still has its tool_result
(the invariant of the loop), only its content is shorter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from harness.messages import Message, ToolResult, ToolUse


def apply_window(messages: Sequence[Message], keep: int) -> list[Message]:
    """`messages` with every tool_result but the last `keep` replaced by a one-line summary."""
    if keep < 0:
        raise ValueError(f"keep must be >= 0 (observations kept whole), got {keep}; e.g. keep=5")
    results = [b.tool_use_id for m in messages for b in m.content if isinstance(b, ToolResult)]
    old = set(results[: max(0, len(results) - keep)])
    if not old:
        return list(messages)
    calls = {b.id: b for m in messages for b in m.content if isinstance(b, ToolUse)}
    out: list[Message] = []
    for message in messages:
        if not any(isinstance(b, ToolResult) and b.tool_use_id in old for b in message.content):
            out.append(message)
            continue
        blocks = tuple(summarise(b, calls.get(b.tool_use_id)) if isinstance(b, ToolResult)
                       and b.tool_use_id in old else b for b in message.content)
        out.append(replace(message, content=blocks))
    return out


def summarise(result: ToolResult, call: ToolUse | None) -> ToolResult:
    """A one-line stand-in for an old observation."""
    lines = result.content.count("\n") + 1
    what = f"{call.name}({_short_args(call.input)})" if call is not None else "an earlier call"
    outcome = "failed" if result.is_error else "succeeded"
    text = (f"[older observation removed from the context: {what} {outcome}; its output had {lines} "
            f"line(s), {len(result.content):,} characters. Repeat the call if you need it again.]")
    return replace(result, content=text)


def _short_args(args: dict[str, Any], width: int = 40) -> str:
    parts = []
    for name, value in args.items():
        text = json.dumps(value, ensure_ascii=False)
        parts.append(f"{name}={text if len(text) <= width else text[:width - 3] + '...'}")
    return ", ".join(parts)
