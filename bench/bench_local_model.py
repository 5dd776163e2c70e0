"""The local model in real sessions, printed (not asserted): speed, how often its replies are usable
tool calls, and how its sessions end, with native tool calls and with ReAct text.

    .venv/bin/python bench/bench_local_model.py [--sessions 12] [--formats native react] [--max-turns 8]
    .venv/bin/python bench/bench_local_model.py --install-only    # the extra's build time in a fresh venv

Per tool format, one server (`local:gemma3-270m`, started by `open_model` as `harness run` does)
serves `--sessions` real sessions (`run_session`: Docker sandbox, full tool catalog, the task's tests)
on the shipped tasks in turn. Printed per format:

- tokens/s: generation and prompt processing, from llama.cpp's own timings of every request, and
  output and input tokens per model-second of the sessions (what a session feels);
- seconds per turn: model time per turn and loop wall time per turn;
- replies: the share of turns with a well-formed tool call (every call of the turn known, JSON
  arguments that match its schema), and the rest: malformed calls (by error kind), empty replies,
  text (the end), cut replies;
- a probe: `--probe` one-turn requests with a short prompt and the bash tool alone, the same
  counts: what the model does in this format when the prompt is small;
- stop reasons over the sessions, sessions that raised (a traceback: the goal is 0), the longest
  session against its budget, and whether every trajectory is valid (each call answered in the next
  message, the file reads back equal) and so resumable.

`--install-only` times `pip install 'llama-cpp-python[server]==0.3.36'` with CMAKE_ARGS=-DGGML_NATIVE=OFF
into a new virtualenv with pip's cache off: the extra's install time on a fresh machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jsonschema import Draft202012Validator  # noqa: E402

from harness.agent.session import run_session, session_image  # noqa: E402
from harness.agent.trajectory import load_trajectory  # noqa: E402
from harness.config import Config, load  # noqa: E402
from harness.core.task import load_task  # noqa: E402
from harness.errors import ModelTruncated  # noqa: E402
from harness.messages import Message, system, user  # noqa: E402
from harness.models.base import MALFORMED  # noqa: E402
from harness.models.factory import open_model  # noqa: E402
from harness.models.react import ReActModel  # noqa: E402
from harness.tools.shell.bash import bash_tool  # noqa: E402

MALFORMED_KINDS = ("parsing", "unknown_tool", "validation")
SPEC = "local:gemma3-270m"


def classify(messages: list[Message]) -> Counter[str]:
    """Each assistant turn as: call (well-formed), malformed:<kind>, empty or text."""
    kinds: Counter[str] = Counter()
    for i, m in enumerate(messages):
        if m.role != "assistant":
            continue
        if not m.tool_uses:
            kinds["empty" if not m.text.strip() else "text"] += 1
            continue
        answered = messages[i + 1].tool_results if i + 1 < len(messages) else []
        bad = [r.error_kind for r in answered if r.error_kind in MALFORMED_KINDS]
        kinds[f"malformed:{bad[0]}" if bad else "call"] += 1
    return kinds


def valid(messages: list[Message], path: Path) -> bool:
    """Every call answered by id in the very next message, and the file reads back equal."""
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            if nxt is None or [r.tool_use_id for r in nxt.tool_results] != [c.id for c in m.tool_uses]:
                return False
    return load_trajectory(path) == messages


EVAL = re.compile(r"^llama_perf_context_print:\s+eval time =\s+([\d.]+) ms /\s+(\d+) runs", re.MULTILINE)
PROMPT = re.compile(r"^llama_perf_context_print: prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens", re.MULTILINE)
TOTAL = re.compile(r"^llama_perf_context_print:\s+total time =\s+([\d.]+) ms /\s+(\d+) tokens", re.MULTILINE)


def server_speed(model: Any) -> dict[str, float]:
    """Generation and prompt tokens per second over every request, from llama.cpp's own timings."""
    inner = model.inner if isinstance(model, ReActModel) else model
    log = inner.server.output()
    evals = [(float(ms), int(n)) for ms, n in EVAL.findall(log)]
    totals = [(float(ms), int(n)) for ms, n in TOTAL.findall(log)]
    # a prompt served from the cache is timed at ~0 ms: only prompts that were evaluated count
    prompts = [(float(ms), int(n)) for ms, n in PROMPT.findall(log) if float(ms) > 1.0]
    gen_ms, gen_n = sum(ms for ms, _ in evals), sum(n for _, n in evals)
    prompt_ms, prompt_n = sum(ms for ms, _ in prompts), sum(n for _, n in prompts)
    all_ms, all_n = sum(ms for ms, _ in totals), sum(n for _, n in totals)
    return {"generation_tokens_per_s": round(1000 * gen_n / gen_ms, 1) if gen_ms else 0.0,
            "prompt_tokens_per_s": round(1000 * prompt_n / prompt_ms, 1) if prompt_ms else 0.0,
            "request_tokens_per_s": round(1000 * all_n / all_ms, 1) if all_ms else 0.0,
            "requests": len(totals)}


PROBE_SYSTEM = "You fix bugs in the project in /workspace. Use the bash tool to look at the files and run the tests."


def probe(model: Any, tasks: list[Any], n: int, config: Config) -> dict[str, Any]:
    """`n` one-turn requests with a short prompt and the bash tool alone: what the model can do in this
    format when the prompt is small (the sessions send the whole catalog and the harness's prompt)."""
    spec = bash_tool(config.tools).spec()
    validator = Draft202012Validator(spec["input_schema"])
    kinds: Counter[str] = Counter()
    started = time.monotonic()
    for i in range(n):
        task = tasks[i % len(tasks)]
        try:
            reply = model.respond([system(PROBE_SYSTEM), user(task.problem_statement.strip())], [spec]).message
        except ModelTruncated:
            kinds["cut"] += 1
            continue
        if not reply.tool_uses:
            kinds["empty" if not reply.text.strip() else "text"] += 1
            continue
        c = reply.tool_uses[0]
        ok = c.name == "bash" and MALFORMED not in c.input and not list(validator.iter_errors(c.input))
        kinds["call" if ok else "malformed"] += 1
    return {"requests": n, "replies": dict(kinds), "well_formed_call_share": round(kinds["call"] / max(n, 1), 3),
            "seconds_per_request": round((time.monotonic() - started) / max(n, 1), 2)}


def run_format(fmt: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    config, secrets = load()
    config = config.replace(model=dataclasses.replace(config.model, tool_format=fmt),
                            loop=dataclasses.replace(config.loop, max_turns=args.max_turns,
                                                     max_wall_seconds=args.max_seconds),
                            approval=dataclasses.replace(config.approval, mode="deny"))
    tasks = [load_task(p) for p in sorted((REPO / "tasks").iterdir()) if (p / "task.json").is_file()]
    images = {t.id: session_image(t, config) for t in tasks}
    sessions: list[dict[str, Any]] = []
    with open_model(SPEC, config, secrets, say=lambda m: print(f"  [{fmt}] {m}", file=sys.stderr)) as model:
        for n in range(args.sessions):
            task = tasks[n % len(tasks)]
            sessions.append(one_session(task, model, config, images[task.id], out / f"{fmt}-{n:02d}-{task.id}"))
            s = sessions[-1]
            print(f"  [{fmt}] {n + 1}/{args.sessions} {task.id}: {s['stop_reason']} after {s['turns']} turn(s), "
                  f"{s['wall']:.0f}s", file=sys.stderr)
        speed = server_speed(model)
        probed = probe(model, tasks, args.probe, config) if args.probe else {}
    return {**summarize(fmt, speed, sessions), "probe": probed}


def one_session(task: Any, model: Any, config: Config, image: str, out: Path) -> dict[str, Any]:
    started = time.monotonic()
    try:
        outcome = run_session(task, model, config, out, image=image)
    except Exception:  # noqa: BLE001 - the benchmark records what a session raised: the goal is none
        return {"task": task.id, "stop_reason": "raised", "traceback": traceback.format_exc(), "turns": 0,
                "wall": time.monotonic() - started, "kinds": {}, "valid": False, "output_tokens": 0,
                "input_tokens": 0, "model_seconds": 0.0, "loop_seconds": 0.0}
    attempt = outcome.attempt_results[-1]
    messages = load_trajectory(out / "trajectory.jsonl")
    truncated = 1 if outcome.stop_reason == "truncated" else 0
    return {"task": task.id, "stop_reason": outcome.stop_reason, "turns": outcome.turns + truncated,
            "wall": time.monotonic() - started, "kinds": dict(classify(messages) + Counter(cut=truncated)),
            "valid": valid(attempt.loop.messages, out / "trajectory.jsonl"),
            "output_tokens": outcome.usage.output_tokens, "input_tokens": outcome.usage.input_tokens,
            "model_seconds": attempt.loop.model_seconds, "loop_seconds": attempt.loop.wall_seconds,
            "tests_passed": outcome.tests_passed}


def summarize(fmt: str, speed: dict[str, float], sessions: list[dict[str, Any]]) -> dict[str, Any]:
    kinds: Counter[str] = Counter()
    for s in sessions:
        kinds.update(s["kinds"])
    replies = sum(kinds.values()) or 1
    turns = sum(s["turns"] for s in sessions) or 1
    model_seconds = sum(s["model_seconds"] for s in sessions) or 1e-9
    return {"format": fmt, "sessions": len(sessions), **speed,
            "session_output_tokens_per_model_s": round(sum(s["output_tokens"] for s in sessions) / model_seconds, 1),
            "session_input_tokens_per_model_s": round(sum(s["input_tokens"] for s in sessions) / model_seconds, 1),
            "model_s_per_turn": round(model_seconds / turns, 2),
            "loop_s_per_turn": round(sum(s["loop_seconds"] for s in sessions) / turns, 2),
            "turns": sum(s["turns"] for s in sessions), "replies": dict(kinds),
            "well_formed_call_share": round(kinds["call"] / replies, 3),
            "stop_reasons": dict(Counter(s["stop_reason"] for s in sessions)),
            "raised": sum(1 for s in sessions if s["stop_reason"] == "raised"),
            "longest_session_s": round(max((s["wall"] for s in sessions), default=0.0), 1),
            "all_trajectories_valid": all(s["valid"] for s in sessions),
            "tracebacks": [s["traceback"] for s in sessions if "traceback" in s]}


def measure_install() -> float:
    with tempfile.TemporaryDirectory(prefix="bench-local-install-") as tmp:
        subprocess.run([sys.executable, "-m", "venv", tmp], check=True)
        started = time.monotonic()
        subprocess.run([f"{tmp}/bin/pip", "install", "-q", "--no-cache-dir", "llama-cpp-python[server]==0.3.36"],
                       check=True, env={**os.environ, "CMAKE_ARGS": "-DGGML_NATIVE=OFF"})
        return time.monotonic() - started


def print_report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"local model {SPEC}: {args.sessions} session(s) per format on the shipped tasks, "
          f"max {args.max_turns} turns, {args.max_seconds:.0f}s budget each")
    for r in results:
        print(f"\n== {r['format']} ({r['sessions']} sessions, {r['turns']} turns)")
        print(f"llama.cpp over {r['requests']} requests: generation {r['generation_tokens_per_s']} tokens/s, "
              f"prompt evaluation {r['prompt_tokens_per_s']} tokens/s, prompt and output tokens per second of "
              f"request time {r['request_tokens_per_s']}; per model-second of the sessions: "
              f"{r['session_output_tokens_per_model_s']} output and {r['session_input_tokens_per_model_s']} "
              "input tokens")
        print(f"seconds per turn: {r['model_s_per_turn']} model, {r['loop_s_per_turn']} loop")
        print(f"well-formed tool call in {100 * r['well_formed_call_share']:.0f}% of replies; replies: {r['replies']}")
        print(f"stop reasons: {r['stop_reasons']}; raised: {r['raised']}; longest session {r['longest_session_s']}s; "
              f"trajectories valid: {r['all_trajectories_valid']}")
        if r["probe"]:
            p = r["probe"]
            print(f"short prompt, bash tool only ({p['requests']} one-turn requests): well-formed tool call in "
                  f"{100 * p['well_formed_call_share']:.0f}%; replies: {p['replies']}; "
                  f"{p['seconds_per_request']}s each")
        for tb in r["tracebacks"]:
            print(tb)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=12, help="sessions per tool format (default 12)")
    parser.add_argument("--formats", nargs="+", default=["native", "react"], choices=["native", "react"])
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="wall-time budget of each session")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-local-model")
    parser.add_argument("--probe", type=int, default=10, help="one-turn requests with a short prompt per format")
    parser.add_argument("--install-only", action="store_true", help="only time the extra's build in a fresh venv")
    args = parser.parse_args()
    if args.install_only:
        print(f"install of llama-cpp-python[server] (built from source, no pip cache): {measure_install():.0f}s")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    results = [run_format(fmt, args, args.out) for fmt in args.formats]
    (args.out / "bench.json").write_text(json.dumps(results, indent=2))
    print_report(results, args)
    print(f"\nper-session files and bench.json: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
