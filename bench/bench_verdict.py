"""What a session's test verdict costs in a fresh sandbox, against taking it in the agent's own sandbox.

    .venv/bin/python bench/bench_verdict.py [--rounds 7] [--task tasks/wordcount]

In place (what `harness run` did before): the task's test command in the sandbox the agent worked in,
which holds the patched tree already (the gold patch is applied there first, untimed). Fresh (what it
does now, `harness.session.fresh_verdict`): a new sandbox of the session's image and limits started, the
starting files copied in, the patch applied as grading applies it, the tests run, the sandbox removed.
The two alternate, --rounds times each, in one run; prints the p50 and spread of each, the difference
(the verdict's extra cost per attempt) and the ratio, and the fresh verdict's parts (start with the
copy, the patch, the tests, the removal) from one more timed run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.config import Config  # noqa: E402
from harness.core.task import Task, load_task  # noqa: E402
from harness.patching import apply_in_sandbox  # noqa: E402
from harness.session import fresh_verdict, session_image, session_spec, verdict_spec  # noqa: E402
from harness.workspace import run_task_tests  # noqa: E402
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
    for _ in range(args.rounds):
        old.append(in_place(task, config, image, patch))
        new.append(fresh(task, config, image, patch))
    print(f"task {task.id}, image {image}, test command: {task.test_cmd}")
    print(_show("in place (the agent's sandbox)", old))
    print(_show("fresh sandbox (start+copy+tests)", new))
    extra = statistics.median(new) - statistics.median(old)
    print(f"the fresh verdict costs {extra * 1000:.0f} ms more per attempt "
          f"({statistics.median(new) / statistics.median(old):.2f}x the in-place test run)")
    for name, seconds in parts(task, config, image, patch).items():
        print(f"  {name:<16} {seconds * 1000:7.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
