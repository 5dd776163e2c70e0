"""A model that replays a script: how tests and the demo drive the harness without a network.

A script is JSON: ``{"turns": [turn, ...]}``. A turn is a list of blocks, each
``{"type": "text", "text": ...}`` or ``{"type": "tool_use", "name": ..., "input": {...}}`` (an "id"
is optional: `call-<turn>-<n>` is assigned when absent, <turn> counted in the messages received, so
a resumed run gets the ids of an uninterrupted one). A turn may also be an object
``{"content": [block, ...], "stop_reason": "max_tokens", "usage": {"input_tokens": 10, ...}}`` to
replay a cut response or a token count. Running out of turns raises `ScriptExhausted`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, get_args

from harness.errors import ConfigError, ModelTruncated, ScriptExhausted
from harness.messages import Message, TextBlock, ToolUse
from harness.models.base import ModelResponse, ModelStopReason, Usage

EXAMPLE = '{"turns": [[{"type": "tool_use", "name": "bash", "input": {"command": "ls"}}], ' \
          '[{"type": "text", "text": "done"}]]}'


class ScriptedModel:
    """Replays `turns` in order, one per call, whatever the messages say."""

    def __init__(self, turns: Sequence[Any], name: str = "scripted", source: str = "<script>") -> None:
        self.name = name
        self.source = source
        self._turns = [_parse_turn(t, i, source) for i, t in enumerate(turns, start=1)]
        self.calls = 0
        self.received: list[list[Message]] = []   # what the model was sent, call by call

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> ScriptedModel:
        path = resolve_script(str(path))
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read the scripted model file {path}: {exc}; expected JSON like "
                              f"{EXAMPLE}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
            raise ConfigError(f"the scripted model file {path} must hold an object with a \"turns\" list, "
                              f"got {str(data)[:200]!r}; example: {EXAMPLE}")
        return cls(data["turns"], name=name or f"scripted:{path}", source=str(path))

    @property
    def turns_left(self) -> int:
        return len(self._turns) - self.calls

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        self.received.append(list(messages))
        if self.calls >= len(self._turns):
            raise ScriptExhausted(
                f"the scripted model {self.source} has {len(self._turns)} turn(s) and was asked for turn "
                f"{self.calls + 1}; add a turn to the script (e.g. [{{\"type\": \"text\", \"text\": "
                f"\"done\"}}] to end) or lower --max-turns")
        content, stop, usage = self._turns[self.calls]
        self.calls += 1
        turn = 1 + sum(1 for m in messages if m.role == "assistant")
        content = tuple(dataclasses.replace(b, id=f"call-{turn}-{n}") if isinstance(b, ToolUse) and not b.id else b
                        for n, b in enumerate(content, start=1))
        message = Message("assistant", content)
        if stop == "max_tokens":
            raise ModelTruncated(f"scripted turn {self.calls} of {self.source} is marked as cut by "
                                 f"max_tokens: {message.text[:200]!r}", partial=message.text,
                                 tokens=(usage.input_tokens, usage.output_tokens))
        stop = stop or ("tool_use" if message.tool_uses else "end_turn")
        return ModelResponse(message=message, stop_reason=stop, usage=usage)


def resolve_script(spec: str) -> Path:
    """A script path as given, else one shipped in the package (harness/data/scripts/NAME[.json])."""
    path = Path(spec)
    if path.is_file():
        return path
    shipped = resources.files("harness") / "data" / "scripts"
    for name in (spec, f"{spec}.json"):
        candidate = Path(str(shipped / name))
        if candidate.is_file():
            return candidate
    raise ConfigError(f"scripted model file {spec!r} not found (as a path, nor shipped in "
                      f"harness/data/scripts/); e.g. --model scripted:tests/scripts/fix.json")


def _parse_turn(turn: Any, index: int, source: str) -> tuple[tuple[Any, ...], ModelStopReason | None, Usage]:
    where = f"turn {index} of {source}"
    stop: ModelStopReason | None = None
    usage = Usage()
    if isinstance(turn, dict):
        stop = turn.get("stop_reason")
        if stop is not None and stop not in get_args(ModelStopReason):
            raise ConfigError(f"{where}: \"stop_reason\" {stop!r} must be one of {list(get_args(ModelStopReason))}; "
                              f'e.g. {{"content": [...], "stop_reason": "max_tokens"}}')
        try:
            usage = Usage(**turn.get("usage", {}))
        except TypeError as exc:
            raise ConfigError(f"{where}: bad \"usage\" {turn.get('usage')!r} ({exc}); expected e.g. "
                              '{"input_tokens": 100, "output_tokens": 20}') from exc
        turn = turn.get("content")
    if not isinstance(turn, list):
        raise ConfigError(f"{where} must be a list of blocks, got {turn!r}; example: {EXAMPLE}")
    return tuple(_parse_block(b, index, n, where) for n, b in enumerate(turn, start=1)), stop, usage


def _parse_block(block: Any, turn: int, n: int, where: str) -> TextBlock | ToolUse:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text" and isinstance(block.get("text"), str):
        return TextBlock(block["text"])
    if kind == "tool_use" and isinstance(block.get("name"), str) and isinstance(block.get("input", {}), dict):
        return ToolUse(id=str(block.get("id") or ""), name=block["name"],
                       input=dict(block.get("input", {})))
    raise ConfigError(f"{where}, block {n}: {block!r} is not a text or tool_use block; expected "
                      '{"type": "text", "text": "..."} or {"type": "tool_use", "name": "bash", '
                      '"input": {"command": "ls"}}')
