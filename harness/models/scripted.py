"""A model that replays a script: how tests and the demo drive the harness without a network.

A script is JSON: ``{"turns": [turn, ...]}``. A turn is a list of blocks, each
``{"type": "text", "text": ...}`` or ``{"type": "tool_use", "name": ..., "input": {...}}`` (an "id"
is optional: `call-<turn>-<n>` is assigned when absent, <turn> counted in the messages received, so
a resumed run gets the ids of an uninterrupted one). A turn may also be an object
``{"content": [block, ...], "stop_reason": "max_tokens", "usage": {"input_tokens": 10, ...}}`` to
replay a cut response or a token count. Running out of turns raises `ScriptExhausted`.

A **plan** gives each attempt at an instance its own script (`harness eval --epochs N`, where the same
instance is attempted N times), so an evaluation's outcome can differ between epochs::

    {"attempts": {"wordcount": ["wordcount-bash", "give-up"], "cart": ["cart-fix"]},
     "scripts": {"give-up": {"turns": [[{"type": "text", "text": "I could not find it."}]]}, ...}}

Attempt k at an instance replays the ((k - 1) mod len)-th name of its list: a script of the plan's
`scripts`, else one shipped in harness/data/scripts (`load_script`).
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
PLAN_EXAMPLE = '{"attempts": {"wordcount": ["wordcount-bash", "give-up"]}, "scripts": {"give-up": {"turns": ' \
               '[[{"type": "text", "text": "I could not find it."}]]}}}'


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
        data = _read(path)
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


def load_script(spec: str, *, name: str | None = None, instance_id: str | None = None,
                attempt: int = 1) -> ScriptedModel:
    """The model a script file names: the script itself, or, for a plan, the script of `attempt` (1, 2,
    ...) at `instance_id`. Raises `ConfigError` for a plan without an instance, or one the plan does
    not name, or a plan that names a script it cannot find."""
    path = resolve_script(spec)
    data = _read(path)
    if not isinstance(data, dict) or "attempts" not in data:
        return ScriptedModel.from_file(path, name)
    attempts, scripts = data.get("attempts"), data.get("scripts", {})
    if not isinstance(attempts, dict) or not isinstance(scripts, dict) or not all(
            isinstance(v, list) and v and all(isinstance(n, str) for n in v) for v in attempts.values()):
        raise ConfigError(f"the scripted plan {path}: \"attempts\" must map instance ids to non-empty lists of "
                          f"script names, and \"scripts\" names to scripts; example: {PLAN_EXAMPLE}")
    if instance_id is None:
        raise ConfigError(f"the scripted plan {path} picks a script for each instance and attempt; use it with a "
                          "task, e.g. harness eval tasks/wordcount --epochs 3 --model scripted:epochs-mixed")
    if instance_id not in attempts:
        raise ConfigError(f"the scripted plan {path} names a script for each attempt at {sorted(attempts)}, not at "
                          f"{instance_id!r}; add it to \"attempts\", e.g. {PLAN_EXAMPLE}")
    chosen = attempts[instance_id][(attempt - 1) % len(attempts[instance_id])]
    label = name or f"scripted:{path}"
    if chosen in scripts:
        turns = scripts[chosen].get("turns") if isinstance(scripts[chosen], dict) else None
        if not isinstance(turns, list):
            raise ConfigError(f"the scripted plan {path}: script {chosen!r} must be an object with a \"turns\" "
                              f"list; example: {EXAMPLE}")
        return ScriptedModel(turns, name=label, source=f"{path} (script {chosen!r})")
    return ScriptedModel.from_file(resolve_script(chosen), label)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the scripted model file {path}: {exc}; expected JSON like "
                          f"{EXAMPLE}") from exc


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
