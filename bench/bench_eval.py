"""The evaluation harness's own cost, measured on the shipped tasks with `--model gold`.

1. Overhead: the wall time of `harness eval tasks/ --model gold --workers 2` (environment images
   already built) against the sum of the raw test-command times of the same tasks, each run once
   directly in its environment image (`docker run` on the project with the gold and test patches
   applied). Reported against both the test command alone (timed inside the container) and the
   whole `docker run` (container start included). Target: under 25% overhead.
2. Throughput: instances per minute for `--workers 1..4` on COPIES x the shipped tasks, and where
   adding workers stops helping on this machine.

    .venv/bin/python bench/bench_eval.py [--copies 2] [--max-workers 4] [--part overhead|throughput]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core.task import Task, find_task_dirs, load_task  # noqa: E402
from harness.environments import ensure_task_image  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402

MARK = "HARNESS-BENCH-SECONDS"


def harness_eval(task_dirs: list[Path], out: Path, workers: int) -> tuple[float, dict[str, Any]]:
    """Wall seconds and report of one `harness eval --model gold` run (the CLI, as a user runs it)."""
    cmd = [sys.executable, "-m", "harness.cli.main", "eval", *map(str, task_dirs), "--model", "gold",
           "--workers", str(workers), "--out", str(out), "--json", "--label", "harness.bench=1"]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - started
    report = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    if proc.returncode != 0 or report.get("resolved_instances") != len(task_dirs):
        raise SystemExit(f"harness eval failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return wall, report


def stage_sums(report: dict[str, Any]) -> str:
    """Seconds per stage summed over the instances, and a warning if an image was built meanwhile."""
    sums: dict[str, float] = {}
    for row in report["instances"].values():
        for stage, seconds in row["durations"].items():
            sums[stage] = sums.get(stage, 0.0) + seconds
    text = ", ".join(f"{k} {v:.2f}" for k, v in sums.items())
    return text + ("   (an image was rebuilt during this run)" if sums.get("environment", 0) > 5 else "")


def raw_test_time(task: Task, image: str, scratch: Path) -> tuple[float, float]:
    """(seconds of the test command inside the container, seconds of the whole docker run)."""
    tree = scratch / task.id
    shutil.copytree(task.repo_dir, tree, symlinks=True)
    for patch in (task.gold_patch, task.test_patch):   # the shipped tasks' own patches: trusted input
        if patch:
            subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=patch, text=True, cwd=tree,
                           check=True, env={"GIT_CEILING_DIRECTORIES": str(scratch), "PATH": "/usr/bin:/bin"})
    script = (f"cp -r /src/. /tmp/w && cd /tmp/w && s=$(date +%s.%N) && ( {task.test_cmd} ) >/dev/null 2>&1; "
              f"e=$(date +%s.%N); echo {MARK} $(echo \"$e - $s\" | python3 -c 'print(eval(input()))')")
    cmd = ["docker", "run", "--rm", "--network", "none", "--label", "harness.managed=true",
           "--label", "harness.bench=1", "-v", f"{tree}:/src:ro", image, "bash", "-c", script]
    started = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - started
    inside = float(next(line.split()[1] for line in out.splitlines() if line.startswith(MARK)))
    return inside, wall


def warm(tasks: list[Task]) -> dict[str, str]:
    """Build (outside any timing) every environment image the tasks need; their tags by task id."""
    return {t.id: ensure_task_image(t, ensure_image(python=t.python)) for t in tasks}


def copies_of(tasks: list[Path], copies: int, root: Path) -> list[Path]:
    """`copies` renamed copies of each task directory (instance ids must be unique)."""
    out = []
    for n in range(copies):
        for d in tasks:
            dest = root / f"{d.name}-{n}"
            shutil.copytree(d, dest)
            meta = json.loads((dest / "task.json").read_text())
            meta["id"] = dest.name
            (dest / "task.json").write_text(json.dumps(meta))
            out.append(dest)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=2, help="copies of the shipped tasks for throughput")
    parser.add_argument("--max-workers", type=int, default=4)
    parser.add_argument("--part", choices=("both", "overhead", "throughput"), default="both")
    args = parser.parse_args()
    dirs = find_task_dirs([REPO / "tasks"])
    tasks = [load_task(d) for d in dirs]
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        scratch = Path(tmp)
        if args.part in ("both", "overhead"):
            overhead(dirs, tasks, scratch)
        if args.part in ("both", "throughput"):
            throughput(dirs, tasks, scratch, args.copies, args.max_workers)


def overhead(dirs: list[Path], tasks: list[Task], scratch: Path) -> None:
    images = warm(tasks)
    harness_eval(dirs, scratch / "warmup", 2)            # caches warm
    raw = [raw_test_time(t, images[t.id], scratch / "trees") for t in tasks]
    inside, docker_wall = sum(r[0] for r in raw), sum(r[1] for r in raw)
    warm(tasks)
    wall, report = harness_eval(dirs, scratch / "overhead", 2)
    print(f"overhead ({len(tasks)} shipped tasks, --model gold, --workers 2, images cached):")
    print(f"  harness eval wall time           {wall:7.2f} s   stage seconds summed: {stage_sums(report)}")
    print(f"  sum of raw test-command times    {inside:7.2f} s   overhead {100 * (wall / inside - 1):6.0f}%")
    print(f"  sum of raw `docker run` times    {docker_wall:7.2f} s   overhead {100 * (wall / docker_wall - 1):6.0f}%",
          flush=True)


def throughput(dirs: list[Path], tasks: list[Task], scratch: Path, copies: int, max_workers: int) -> None:
    many = copies_of(dirs, copies, scratch / "copies")
    print(f"throughput ({len(many)} instances, --model gold):")
    best = 0.0
    for workers in range(1, max_workers + 1):
        warm(tasks)
        seconds, report = harness_eval(many, scratch / f"workers-{workers}", workers)
        rate = 60 * len(many) / seconds
        note = "" if rate > best * 1.05 else "   <- no longer helps"
        best = max(best, rate)
        print(f"  --workers {workers}: {seconds:7.2f} s   {rate:6.1f} instances/min{note}   "
              f"[{stage_sums(report)}]", flush=True)


if __name__ == "__main__":
    main()
