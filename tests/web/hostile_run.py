"""A run folder crafted to break a trajectory viewer: markup and script in every field the model
controls (its text, tool names, ids, arguments, outputs, the patch, the test output), bidi overrides
and zero-width characters, terminal escapes, enormous outputs, a line that is not JSON, a torn last
line, and as many steps as asked. The first lines are written through the harness's own
TrajectoryWriter; the steps in the same format (`safe_json` of the message with its meta), in one write,
because syncing each of 20,000 lines would take most of a minute."""

from __future__ import annotations

import json
from pathlib import Path

from harness.agent.trajectory import TrajectoryWriter
from harness.messages import Message, TextBlock, ToolResult, ToolUse
from sandbox.text import safe_json

SCRIPT = "<script>window.pwned=1</script>"
IMG = '<img src=x onerror="window.pwned=2">'
BIDI = "\u202egnp.exe\u200b"
ESC = "\x1b[2J\x1b]0;owned\x07"
MARKUP = f"{SCRIPT}{IMG}{BIDI}{ESC}"


def write_hostile_run(folder: Path, steps: int = 200, big_output_bytes: int = 2_000_000, finished: bool = True) -> Path:
    """A run folder with `steps` tool-call steps (each an assistant call and its result); returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = TrajectoryWriter(folder / "trajectory.jsonl")
    writer.write(Message("system", (TextBlock(f"system prompt {MARKUP}"),)))
    writer.write(Message("user", (TextBlock(f"problem {MARKUP}\n" + "line\n" * 300),)))
    big = ("x" * 99 + "\n") * (big_output_bytes // 100)
    quiet = {"bytes": 0, "lines": 0, "truncated": False, "saved_path": None}
    lines: list[str] = []

    def write(message: Message, meta: dict[str, object]) -> None:
        lines.append(safe_json({**message.to_dict(), "meta": meta}) + "\n")

    for n in range(steps):
        call_id = f"call-{n}-{SCRIPT}" if n % 50 == 0 else f"call-{n}"
        name = f"bash{IMG}" if n == 3 else "bash"
        write(Message("assistant", (TextBlock(f"step {n}: {MARKUP}"),
                                           ToolUse(call_id, name, {"command": f"echo {MARKUP}", "n": n}))),
                     {"turn": n + 1, "stop_reason": "tool_use", "usage": {"input_tokens": 10 * n, "output_tokens": 5}})
        output = big if n == 1 else f"output of step {n} {MARKUP}\n" + f"{n}\n" * (n % 40)
        write(Message("user", (ToolResult(call_id, output, is_error=n % 7 == 0,
                                                 error_kind="tool" if n % 7 == 0 else None),)),
                     {"turn": n + 1, "tools": [{"id": call_id, "name": name, "seconds": 0.01 * (n % 13),
                                                "is_error": n % 7 == 0,
                                                "details": {"exit_code": n % 3, "timed_out": False,
                                                            "duration_seconds": 0.01,
                                                            "stdout": {**quiet, "bytes": len(output),
                                                                       "lines": output.count("\n")},
                                                            "stderr": quiet,
                                                            "killed_leftovers": 0}}]})
    with (folder / "trajectory.jsonl").open("a", encoding="utf-8") as f:
        f.write("".join(lines))
        f.write("this line is not JSON " + SCRIPT + "\n")
        f.write('{"role": "assistant", "content": [{"type": "text", "text": "torn')
    (folder / "patch.diff").write_text(
        f"diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-old {SCRIPT}\n+new {IMG}{BIDI}\n ctx\n")
    (folder / "tests.txt").write_text(f"FAILED test_x {MARKUP}\n")
    if finished:
        (folder / "result.json").write_text(json.dumps({
            "task": f"task{SCRIPT}", "model": f"model{IMG}", "stop_reason": "max_turns", "turns": steps,
            "usage": {"input_tokens": 1234, "output_tokens": 56}, "cost_usd": 0.5, "tests_passed": False,
            "durations": {"total": 12.5}, "final_text": MARKUP, "finished_at": "2026-12-01T10:00:00+00:00"}))
    return folder
