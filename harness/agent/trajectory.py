"""The trajectory on disk: one JSON line per message, appended as the run goes.

Each line is ``Message.to_dict()``, optionally with a ``"meta"`` object (turn number, token usage,
durations) that readers of messages ignore. A line is flushed and synced before the run goes on,
so a killed run loses nothing it had done and can be resumed from the file. The file is created
0600 (a missing folder 0700) and opened without following links: a link planted at its path is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness import checks
from harness.errors import HarnessError
from harness.messages import Message
from sandbox.text import safe_json


class TrajectoryWriter:
    """Appends messages to `path` (created empty unless `append`)."""

    def __init__(self, path: Path, *, append: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if append:
            # created if missing; a link there is refused before reading
            os.close(checks.open_file(self.path, append=True))
            self.count = len(read_lines(self.path))
        else:
            checks.write_file(self.path, "")
            self.count = 0

    def write(self, message: Message, meta: dict[str, Any] | None = None) -> None:
        line = message.to_dict()
        if meta:
            line["meta"] = meta
        with os.fdopen(checks.open_file(self.path, append=True), "a", encoding="utf-8") as f:
            f.write(safe_json(line) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.count += 1

    def write_all(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.write(m)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The raw JSON objects of a trajectory file; a torn last line (a kill mid-write) is dropped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    out: list[dict[str, Any]] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            out.append(json.loads(text))
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break
            raise HarnessError(f"{path}:{number} is not a JSON line ({exc}); a trajectory holds one "
                               'message per line, e.g. {"role": "user", "content": [...]}') from exc
    return out


def load_trajectory(path: Path) -> list[Message]:
    """The messages of a trajectory file, in order."""
    path = Path(path)
    if not path.is_file():
        raise HarnessError(f"no trajectory at {path}; pass the --out directory of an earlier run, "
                           "which holds trajectory.jsonl")
    try:
        return [Message.from_dict(d) for d in read_lines(path)]
    except (KeyError, ValueError) as exc:
        raise HarnessError(f"{path} holds a malformed message: {exc}") from exc
