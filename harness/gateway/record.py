"""calls.jsonl: one JSON line per request the gateway received, model calls and refusals alike.

A line: ``{"time", "method", "route", "api", "status", "outcome", "stream", "messages", "tools",
"response", "usage", "cost_usd", "seconds", "error"}``; `messages` and `response` are harness
`Message.to_dict()` values, `tools` the tool names sent. Everything in it came from the sandbox or the
model and is hostile: written with `sandbox.text.safe_json` (terminal-unsafe characters as JSON
escapes) and a refused target cut to `MAX_TARGET` characters.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from harness import checks
from harness.messages import Message
from harness.models import Usage
from sandbox.text import safe_json

RECORD_NAME = "calls.jsonl"
MAX_TARGET = 500

Outcome = Literal["answered", "truncated", "refused", "bad_request", "budget", "model_error"]
"""answered: the model's reply; truncated: its cut part (finish_reason length); refused: not a model
route (403); bad_request: unreadable body (400); budget: a budget or the recording was spent (400);
model_error: the backend failed after its retries (502)."""


@dataclass(frozen=True)
class CallRecord:
    method: str
    route: str
    status: int
    outcome: Outcome
    api: str | None = None
    stream: bool = False
    messages: tuple[Message, ...] = ()
    tools: tuple[str, ...] = ()
    response: Message | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    seconds: float = 0.0
    error: str | None = None
    time: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        route = self.route if len(self.route) <= MAX_TARGET else f"{self.route[:MAX_TARGET]}... ({len(self.route)})"
        return {"time": datetime.fromtimestamp(self.time, UTC).isoformat(timespec="milliseconds"),
                "method": self.method[:MAX_TARGET], "route": route, "api": self.api, "status": self.status,
                "outcome": self.outcome, "stream": self.stream, "messages": [m.to_dict() for m in self.messages],
                "tools": list(self.tools), "response": self.response.to_dict() if self.response else None,
                "usage": dataclasses.asdict(self.usage) if self.usage else None, "cost_usd": self.cost_usd,
                "seconds": round(self.seconds, 3), "error": self.error}


class CallLog:
    """Appends records to `path` (None: keeps nothing on disk); safe from several threads."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: CallRecord) -> None:
        if self.path is None:
            return
        line = (safe_json(record.to_dict()) + "\n").encode("utf-8")
        with self._lock:
            fd = checks.open_file(self.path, append=True)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a calls.jsonl, in order (for tests and reports)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
