"""What both provider APIs share: the parsed call, the request error, JSON and SSE answers.

A `ParsedCall` is what a request asked for in the harness's own terms (messages, tool specs in the
`Tool.spec()` shape, stream or not); `BadRequest` is a request the gateway cannot read, answered as
400 in the provider's own error shape with what was wrong and a correct example.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.messages import Message
from sandbox.loopback import HttpResponse

MAX_SHOWN = 200
"""Characters of a hostile value quoted back in an error message."""


class BadRequest(Exception):
    """A request body the gateway cannot read: `message` says what, the value and a correct example."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.message, self.status, self.kind = message, status, kind


@dataclass(frozen=True)
class ParsedCall:
    """One model call as the client asked for it, in the harness's types."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...]
    stream: bool = False
    include_usage: bool = False           # OpenAI stream_options.include_usage
    max_tokens: int | None = None         # recorded; the host's model setting governs the call
    stop: tuple[str, ...] = ()            # applied to the answer's text
    extra: dict[str, Any] = field(default_factory=dict)


def shown(value: object) -> str:
    """A hostile value quoted in an error message: repr, cut to MAX_SHOWN characters."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN]}... ({len(text)} characters)"


def read_json(body: bytes, example: str) -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        BadRequest: the body is not UTF-8 JSON, or not an object.
    """
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadRequest(f"the request body is not UTF-8 ({exc}); send a JSON object, e.g. {example}") from exc
    except json.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not valid JSON ({exc.msg} at line {exc.lineno} column "
                         f"{exc.colno}): {shown(body[:MAX_SHOWN])}; send a JSON object, e.g. {example}") from exc
    except RecursionError as exc:
        raise BadRequest(f"the request body nests too deeply to read; send a JSON object, e.g. {example}") from exc
    except ValueError as exc:     # e.g. an integer of more digits than Python converts
        raise BadRequest(f"the request body cannot be read as JSON ({str(exc)[:MAX_SHOWN]}); send a JSON "
                         f"object, e.g. {example}") from exc
    if not isinstance(data, dict):
        raise BadRequest(f"the request body must be a JSON object, got {type(data).__name__}: {shown(data)}; "
                         f"e.g. {example}")
    return data


def need(condition: bool, message: str) -> None:
    """Raise BadRequest(message) unless `condition`."""
    if not condition:
        raise BadRequest(message)


def stop_list(value: object, where: str) -> tuple[str, ...]:
    """`stop` / `stop_sequences`: absent, a string or a list of strings."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    need(isinstance(value, list) and all(isinstance(s, str) for s in value),
         f"{where} must be a string or a list of strings, got {shown(value)}; e.g. \"{where}\": [\"\\n\\n\"]")
    assert isinstance(value, list)
    return tuple(s for s in value if s)


def positive_int(value: object, where: str) -> int | None:
    if value is None:
        return None
    need(isinstance(value, int) and not isinstance(value, bool) and value > 0,
         f"{where} must be a whole number above 0, got {shown(value)}; e.g. \"{where}\": 4096")
    assert isinstance(value, int)
    return value


def flag(value: object, where: str) -> bool:
    if value is None:
        return False
    need(isinstance(value, bool), f"{where} must be true or false, got {shown(value)}; e.g. \"{where}\": true")
    return bool(value)


def cut_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, str | None]:
    """`text` up to the first of the `stop` sequences, and the sequence found (None: none was)."""
    found = [(text.find(s), s) for s in stop if s in text]
    if not found:
        return text, None
    at, seq = min(found)
    return text[:at], seq


def json_answer(status: int, reason: str, data: object) -> HttpResponse:
    body = json.dumps(data, ensure_ascii=False).encode("utf-8")
    return HttpResponse(status, reason, (("Content-Type", "application/json"),
                                         ("Content-Length", str(len(body)))), body)


def sse_answer(events: Iterable[tuple[str | None, object]]) -> HttpResponse:
    """A `text/event-stream` answer, whole: each (event name or None, data) becomes one event; a data
    that is a str is sent as is (`[DONE]`), anything else as JSON."""
    parts = []
    for name, data in events:
        line = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        parts.append((f"event: {name}\n" if name else "") + f"data: {line}\n\n")
    body = "".join(parts).encode("utf-8")
    return HttpResponse(200, "OK", (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
                                    ("Content-Length", str(len(body)))), body)


def text_of(value: object, where: str, example: str) -> str:
    """Message content given as a string or a list of text parts/blocks, joined into one text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    need(isinstance(value, list), f"{where} must be a string or a list of text parts, got {shown(value)}; "
                                  f"e.g. {example}")
    assert isinstance(value, list)
    texts = []
    for n, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        need(isinstance(part, dict) and kind == "text" and isinstance(part.get("text"), str),
             f"{where}[{n}] is {shown(part)}: only text parts are forwarded (images, audio and files are not); "
             f"e.g. {example}")
        texts.append(str(part["text"]))
    return "\n".join(texts)
