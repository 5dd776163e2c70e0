"""ReAct for models without native tool calls: the catalog as a Thought/Action/Observation prompt.

The wrapped model gets plain text only (no `tools`): the system prompt lists the tools and the
format; past calls are written back as `Action:`/`Action Input:` lines and results as
`Observation:` text. From each reply the first Action is parsed into a `ToolUse` and the reply is
cut right after it: an Observation the model writes itself is never believed. An Action out of
format, or a reply with neither an Action nor a `Final Answer:`, becomes a call the loop answers with
an error observation showing the expected format. A reply cut at max_tokens whose first Action is
complete is kept: it would have been cut right after that Action anyway.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from harness.errors import ModelTruncated
from harness.messages import Message, TextBlock, ToolResult, ToolUse, system, user
from harness.models.base import MALFORMED, Model, ModelResponse, ModelStopReason, Usage, malformed_call

ACTION = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*(?P<name>[^\n]*)$", re.MULTILINE)
INPUT = re.compile(r"^[ \t]*Action[ \t]+Input[ \t]*:[ \t]*", re.MULTILINE)
FINAL = re.compile(r"^[ \t]*Final[ \t]+Answer[ \t]*:", re.MULTILINE | re.IGNORECASE)
OBSERVATION = re.compile(r"^[ \t]*Observation[ \t]*:", re.MULTILINE)
FORMAT = ("Thought: what you know and what to do next\n"
          "Action: the name of one tool\n"
          'Action Input: one JSON object with its arguments, e.g. {"path": "src/app.py"}')
INSTRUCTIONS = """You work by repeating Thought, Action and Observation. Write exactly this, then stop:

{format}

The Observation (the tool's output) is written for you after each Action: never write it yourself.
When the task is done, write a Thought and then `Final Answer:` with a short summary, and no Action.

Tools (name, what it does, JSON Schema of its Action Input):
{tools}"""


class ReActModel:
    """Wraps a text model so that it drives the same tool catalog through a ReAct transcript."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = f"{inner.name}+react"

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        call_id = f"react-{len(messages)}"
        try:
            response = self.inner.respond(render(messages, tools), [])
        except ModelTruncated as exc:
            kept = parse_reply(exc.partial, call_id=call_id)
            if not kept.tool_uses or kept.tool_uses[0].input.get(MALFORMED) is not None:
                raise
            return ModelResponse(message=kept, stop_reason="tool_use", usage=Usage(*exc.tokens))
        message = parse_reply(response.message.text, call_id=call_id)
        stop: ModelStopReason = "tool_use" if message.tool_uses else "end_turn"
        return ModelResponse(message=message, stop_reason=stop, usage=response.usage, raw=response.raw)


def render(messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> list[Message]:
    """The transcript as plain text messages, with the tools and the format in the system prompt."""
    listing = "\n".join(f"- {t['name']}: {t['description']}\n  {json.dumps(t['input_schema'])}" for t in tools)
    prompt = INSTRUCTIONS.format(format=FORMAT, tools=listing or "(none)")
    head = "\n\n".join(m.text for m in messages if m.role == "system")
    out = [system(f"{head}\n\n{prompt}" if head else prompt)]
    for m in messages:
        if m.role == "assistant":
            out.append(Message("assistant", (TextBlock(_assistant_text(m)),)))
        elif m.role == "user":
            out.append(user(_user_text(m)))
    return out


def _assistant_text(m: Message) -> str:
    parts = [b.text for b in m.content if isinstance(b, TextBlock) and b.text.strip()]
    for call in m.tool_uses:
        bad = call.input.get(MALFORMED)
        if isinstance(bad, dict):
            parts.append(str(bad.get("raw", "")))
        else:
            parts.append(f"Action: {call.name}\nAction Input: {json.dumps(call.input, ensure_ascii=False)}")
    return "\n".join(parts)


def _user_text(m: Message) -> str:
    parts = [_observation(b) if isinstance(b, ToolResult) else b.text
             for b in m.content if isinstance(b, (ToolResult, TextBlock))]
    return "\n\n".join(parts)


def _observation(r: ToolResult) -> str:
    return f"Observation{' (error)' if r.is_error else ''}:\n{r.content}"


def parse_reply(text: str, call_id: str) -> Message:
    """The assistant message of one ReAct reply: its Thought, and its first Action as a ToolUse."""
    observed = OBSERVATION.search(text)
    if observed:
        text = text[: observed.start()]
    action = ACTION.search(text)
    if action is None and (FINAL.search(text) or not text.strip()):
        return Message("assistant", (TextBlock(text.strip()),))
    if action is None:
        return Message("assistant", (TextBlock(text.strip()), malformed_call(
            call_id, "?", text.strip(), "your reply has neither an Action nor a `Final Answer:`; to use a tool, "
            f"write exactly:\n{FORMAT}\nor, when the task is done, write `Final Answer:` and a short summary")))
    thought = text[: action.start()].strip()
    name = action.group("name").strip()
    rest = text[action.end():]
    call, used = _parse_action(name, rest, call_id)
    raw = text[action.start(): action.end() + used].strip()
    if call.input.get(MALFORMED) is not None:
        call = malformed_call(call_id, call.name, raw, call.input[MALFORMED]["error"])
    blocks = ((TextBlock(thought),) if thought else ()) + (call,)
    return Message("assistant", blocks)


def _parse_action(name: str, rest: str, call_id: str) -> tuple[ToolUse, int]:
    """The call and how many characters of `rest` it used (the reply is cut there)."""
    def bad(problem: str, used: int) -> tuple[ToolUse, int]:
        return malformed_call(call_id, name or "?", "", f"{problem}; write exactly:\n{FORMAT}"), used
    if not re.fullmatch(r"[A-Za-z_][\w.-]*", name):
        return bad(f"the Action must be the name of one tool, got {name!r}", len(rest))
    given = INPUT.match(rest.lstrip("\n")) if rest.strip() else None
    if given is None:
        return bad(f"the Action {name!r} has no `Action Input:` line after it", len(rest))
    skipped = len(rest) - len(rest.lstrip("\n"))
    start = skipped + given.end()
    start += len(rest[start:]) - len(rest[start:].lstrip())
    try:
        args, end = json.JSONDecoder().raw_decode(rest, start)
    except json.JSONDecodeError as exc:
        return bad(f"the Action Input of {name!r} is not valid JSON ({exc.msg} at char {exc.pos - start})",
                   len(rest))
    if not isinstance(args, dict):
        return bad(f"the Action Input of {name!r} must be a JSON object, got {type(args).__name__}", end)
    return ToolUse(id=call_id, name=name, input=args), end
