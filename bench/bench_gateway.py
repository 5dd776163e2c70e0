"""What the model gateway costs per model call. Prints its figures.

1. In process: the gateway alone (parse, model call, answer, calls.jsonl) with a model that answers at
   once, for agent histories of growing length.
2. End to end (`--end-to-end`, real Docker): a client inside the sandbox calling an OpenAI-compatible echo
   server on the host through the relay, the gateway and the harness's OpenAI adapter, against the same
   client on the host calling the same server directly, measured in the same run: the added latency per
   call (p50, p90).

    PYTHONPATH=. .venv/bin/python bench/bench_gateway.py [--end-to-end] [--calls 300] [--chars 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.agent.external import run_external_session  # noqa: E402
from harness.config import Config  # noqa: E402
from harness.core.task import load_task  # noqa: E402
from harness.external import parse_agent  # noqa: E402
from harness.gateway import Gateway  # noqa: E402
from harness.messages import Message, TextBlock  # noqa: E402
from harness.models import ModelResponse, Usage  # noqa: E402
from harness.models.openai import OpenAIModel  # noqa: E402
from sandbox.loopback import HttpRequest  # noqa: E402
from tests.gateway_echo import client_agent, client_source, echo_server  # noqa: E402


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


def in_process() -> None:
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


def end_to_end(calls: int, chars: int) -> None:
    def done(text: str) -> list[str]:
        return next(line.split() for line in text.splitlines() if line.startswith("DONE "))

    config = Config()
    config = config.replace(loop=replace(config.loop, max_turns=calls + 10))
    with echo_server() as server, tempfile.TemporaryDirectory() as tmp:
        direct = subprocess.run([sys.executable, "-I", "-c", client_source(calls, 7, chars)], capture_output=True,
                                text=True, check=True, env={**os.environ, "OPENAI_BASE_URL": server.url,
                                                            "HARNESS_MODEL": "echo"})
        model = OpenAIModel("echo", api_key="k", config=config.model, max_tokens=1000, base_url=server.url)
        run_external_session(load_task(REPO / "tasks" / "wordcount"), parse_agent(client_agent(calls, 7, chars)),
                             model, config, Path(tmp) / "run", labels={"harness.bench": "1"})
        through = (Path(tmp) / "run" / "agent.log").read_text()
    (_, n1, bad1, chain1, p50a, p90a), (_, n2, bad2, chain2, p50b, p90b) = done(direct.stdout), done(through)
    print(f"end to end, {calls} calls of 1-{chars} random characters (same texts both ways):")
    print(f"  host -> echo server directly:               p50 {float(p50a):7.2f} ms, p90 {float(p90a):7.2f} ms")
    print(f"  sandbox -> relay -> gateway -> echo server: p50 {float(p50b):7.2f} ms, p90 {float(p90b):7.2f} ms")
    print(f"  added by the gateway path: p50 {float(p50b) - float(p50a):+.2f} ms ({float(p50b) / float(p50a):.1f}x), "
          f"p90 {float(p90b) - float(p90a):+.2f} ms")
    print(f"  calls answered {n1} / {n2}, mismatches {bad1} / {bad2}, same texts: {chain1 == chain2}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--end-to-end", action="store_true", help="also measure through a real sandbox")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--chars", type=int, default=1024)
    args = parser.parse_args()
    in_process()
    if args.end_to_end:
        end_to_end(args.calls, args.chars)


if __name__ == "__main__":
    main()
