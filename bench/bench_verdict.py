"""What a session's test verdict costs in a fresh sandbox, against taking it in the agent's own sandbox.

    .venv/bin/python bench/bench_verdict.py [--rounds 7] [--task tasks/wordcount]

In place (what `harness run` did before): the task's test command in the sandbox the agent worked in,
which holds the patched tree already (the gold patch is applied there first, untimed). Fresh (what it
does now, `harness.agent.session.fresh_verdict`): a new sandbox of the session's image and limits started, the
starting files copied in, the patch applied as grading applies it, the tests run, the sandbox removed.
Started ahead (what a session does: `StartedAhead`, the verdict's sandbox brought up while the agent
works): only what is left once the patch is known, the sandbox already up (its start untimed, as the
agent's turns cover it). The three alternate, --rounds times each, in one run; prints the p50 and
spread of each, the extra cost per attempt over the in-place run and the ratio, and the fresh
verdict's parts (start with the copy, the patch, the tests, the removal) from one more timed run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.agent.session import StartedAhead, fresh_verdict, session_image, session_spec, verdict_spec  # noqa: E402
from harness.agent.workspace import run_task_tests  # noqa: E402
from harness.config import Config  # noqa: E402
from harness.core.task import Task, load_task  # noqa: E402
from harness.patching import apply_in_sandbox  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402

LABELS = {"harness.bench": "1"}


def in_place(task: Task, config: Config, image: str, patch: str) -> float:
    """Seconds of the test command in a sandbox that already holds the patched tree (its start untimed)."""
    with DockerSandbox(session_spec(task, config, image, LABELS)) as box:
        assert apply_in_sandbox(box, patch, "bench").applied
        started = time.perf_counter()
        result = run_task_tests(box, task, config)
        took = time.perf_counter() - started
    assert result.ok, result.stdout.text[-500:]
    return took


def fresh(task: Task, config: Config, image: str, patch: str) -> float:
    started = time.perf_counter()
    verdict = fresh_verdict(task, patch, config, verdict_spec(task, config, image, LABELS))
    took = time.perf_counter() - started
    assert verdict.passed, verdict.output(500)
    return took


def started_ahead(task: Task, config: Config, image: str, patch: str) -> float:
    ahead = StartedAhead(verdict_spec(task, config, image, LABELS))
    try:
        ahead.take()   # the agent's turns cover the start: not timed
        started = time.perf_counter()
        verdict = fresh_verdict(task, patch, config, verdict_spec(task, config, image, LABELS), ahead=ahead)
        took = time.perf_counter() - started
    finally:
        ahead.discard()
    assert verdict.passed, verdict.output(500)
    return took


def parts(task: Task, config: Config, image: str, patch: str) -> dict[str, float]:
    """The fresh verdict's steps, timed one by one (the same calls fresh_verdict makes)."""
    t0 = time.perf_counter()
    box = DockerSandbox(verdict_spec(task, config, image, LABELS))
    box.start()
    t1 = time.perf_counter()
    try:
        assert apply_in_sandbox(box, patch, "bench").applied
        t2 = time.perf_counter()
        assert run_task_tests(box, task, config).ok
        t3 = time.perf_counter()
    finally:
        box.close()
    t4 = time.perf_counter()
    return {"start and copy": t1 - t0, "patch": t2 - t1, "tests": t3 - t2, "removal": t4 - t3}


def _show(name: str, values: list[float]) -> str:
    return (f"{name:<34} p50 {statistics.median(values) * 1000:7.0f} ms  "
            f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f}, n={len(values)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--task", type=Path, default=Path(__file__).resolve().parent.parent / "tasks" / "wordcount")
    args = parser.parse_args()
    task = load_task(args.task)
    config = Config()
    image = session_image(task, config)
    patch = (args.task / "gold.patch").read_text()
    fresh(task, config, image, patch)          # warm: image layers and the first sandbox of the process
    old: list[float] = []
    new: list[float] = []
    ahead: list[float] = []
    for _ in range(args.rounds):
        old.append(in_place(task, config, image, patch))
        new.append(fresh(task, config, image, patch))
        ahead.append(started_ahead(task, config, image, patch))
    print(f"task {task.id}, image {image}, test command: {task.test_cmd}")
    print(_show("in place (the agent's sandbox)", old))
    for name, values in (("fresh sandbox (start+copy+tests)", new), ("fresh, started ahead (as a session)", ahead)):
        print(_show(name, values))
        extra = statistics.median(values) - statistics.median(old)
        print(f"{'':<34} {extra * 1000:+.0f} ms per attempt against in place "
              f"({statistics.median(values) / statistics.median(old):.2f}x)")
    for name, seconds in parts(task, config, image, patch).items():
        print(f"  {name:<16} {seconds * 1000:7.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
