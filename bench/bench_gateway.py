"""What the model gateway itself costs per request (parse, model call, answer, calls.jsonl), with a model
that answers at once, for agent histories of growing length. Prints its figures.

    PYTHONPATH=. .venv/bin/python bench/bench_gateway.py
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.gateway import Gateway
from harness.messages import Message, TextBlock
from harness.models import ModelResponse, Usage
from sandbox.loopback import HttpRequest


class Instant:
    name = "instant"

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        return ModelResponse(Message("assistant", (TextBlock("ok"),)), "end_turn", Usage(10, 1))


def history(turns: int) -> bytes:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s" * 2000}]
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        messages += [{"role": "user", "content": "output " * 300},
                     {"role": "assistant", "content": "thought", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 1000}]
    return json.dumps({"model": "m", "messages": messages}).encode()


def main() -> None:
    repeats = 50
    with tempfile.TemporaryDirectory() as tmp:
        for turns in (1, 50, 200):
            body = history(turns)
            for record in (None, Path(tmp) / f"calls-{turns}.jsonl"):
                gateway = Gateway(Instant(), record=record)
                started = time.perf_counter()
                for _ in range(repeats):
                    gateway.handle(HttpRequest("POST", "/v1/chat/completions", (), body))
                ms = (time.perf_counter() - started) / repeats * 1000
                size = f", calls.jsonl {record.stat().st_size / repeats / 1e6:.2f} MB per call" if record else ""
                state = "on " if record else "off"
                print(f"{turns:3d} turns ({len(body) / 1e6:.2f} MB body), record {state}: {ms:5.1f} ms per "
                      f"request{size}")


if __name__ == "__main__":
    main()
