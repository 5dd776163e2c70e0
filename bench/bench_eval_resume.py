"""Stop and resume of `harness eval`, measured: the shipped tasks (tasks/*) with `--model gold`, killed at
a random moment (SIGKILL and SIGTERM mixed) and resumed to completion, against an uninterrupted run
measured in the same process.

    .venv/bin/python bench/bench_eval_resume.py [--trials 20] [--workers 2] [--seed 1]

Prints, over the trials: reports identical to the uninterrupted run's (per-instance status, counts and
id lists; times ignored), instances graded twice (a `done` record that was there at the kill and was
rewritten by the resume, or an instance folder with more than one test run), containers of the run
left after the resume, processes left, containers still alive 2 s after a SIGKILL (no reaper has run
yet: that is the sandbox lifeline's figure, docs/sandbox.md), and the time overhead: (time until the
kill + the resume's time) / the uninterrupted run's time.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker

ROOT = Path(__file__).resolve().parents[1]
TASKS = sorted(p for p in (ROOT / "tasks").iterdir() if (p / "task.json").is_file())
COUNTS = ("total_instances", "completed_instances", "resolved_instances", "unresolved_instances",
          "empty_patch_instances", "patch_failed_instances", "error_instances", "incomplete_instances",
          "unsupported_instances")
ID_LISTS = ("submitted_ids", "completed_ids", "resolved_ids", "unresolved_ids", "empty_patch_ids", "patch_failed_ids",
            "error_ids", "incomplete_ids", "flaky_ids", "unsupported_ids")


@dataclass
class Trial:
    signal: str
    at: float
    delivered: bool                   # the run was still going when the signal was sent
    identical: bool
    graded_twice: int
    containers_left: int
    processes_left: int
    alive_after_kill: int | None
    seconds: float


def command(out: Path, label: str, workers: int) -> list[str]:
    return [sys.executable, "-m", "harness.cli.main", "eval", *map(str, TASKS), "--model", "gold", "--workers",
            str(workers), "--out", str(out), "--label", "harness.bench=eval-resume", "--label",
            f"eval.bench.run={label}", "--json"]


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    return {"counts": {k: report[k] for k in COUNTS},
            "ids": {k: report[k] for k in ID_LISTS},
            "status": {i: row["status"] for i, row in report["instances"].items()}}


def containers(client: docker.DockerClient, label: str) -> int:
    return len(client.api.containers(all=True, filters={"label": f"eval.bench.run={label}"}))


def processes(out: Path) -> int:
    found = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True)
    return len(found.stdout.split())


def stamps(out: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for marker in (out / "instances").glob("*/done"):
        st = marker.stat()
        found[marker.parent.name] = (st.st_ino, st.st_mtime_ns)
    return found


def graded_more_than_once(out: Path, before: dict[str, tuple[int, int]]) -> int:
    after = stamps(out)
    rerun = {i for i, s in before.items() if after.get(i) != s}
    for folder in (out / "instances").iterdir():
        runs = json.loads((folder / "grading.json").read_text()) if (folder / "grading.json").is_file() else []
        if len(list(folder.glob("test_output*"))) > 1 or len(runs) > 1:
            rerun.add(folder.name)
    return len(rerun)


def baseline(where: Path, workers: int) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    done = subprocess.run(command(where / "baseline", "baseline", workers), cwd=ROOT, capture_output=True,
                          text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"the uninterrupted run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return verdicts(json.loads(done.stdout)), time.monotonic() - t0


def trial(number: int, where: Path, client: docker.DockerClient, sig: signal.Signals, at: float,
          expected: dict[str, Any], workers: int) -> Trial:
    out, label = where / f"trial-{number}", f"trial-{number}"
    cmd = command(out, label, workers)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    delivered = False
    try:
        proc.wait(timeout=at)
    except subprocess.TimeoutExpired:
        proc.send_signal(sig)
        delivered = True
    alive = None
    if sig == signal.SIGKILL and proc.poll() is None:
        proc.wait()
        time.sleep(2.0)
        alive = containers(client, label)
    proc.wait()
    stopped = time.monotonic() - t0
    before = stamps(out) if (out / "instances").is_dir() else {}
    t1 = time.monotonic()
    resumed = subprocess.run(cmd + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=3600)
    seconds = stopped + time.monotonic() - t1
    identical = resumed.returncode == 0 and verdicts(json.loads(resumed.stdout)) == expected
    return Trial(sig.name, round(at, 2), delivered, identical, graded_more_than_once(out, before),
                 containers(client, label), processes(out), alive, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    client = docker.from_env()
    with tempfile.TemporaryDirectory(prefix="bench-eval-resume-") as tmp:
        where = Path(tmp)
        expected, reference = baseline(where, args.workers)
        print(f"uninterrupted: {len(TASKS)} tasks, {args.workers} workers, {reference:.1f}s")
        trials = []
        for number in range(args.trials):
            sig = signal.SIGKILL if number % 2 == 0 else signal.SIGTERM
            at = rng.uniform(0.5, 0.75 * reference)
            result = trial(number, where, client, sig, at, expected, args.workers)
            trials.append(result)
            print(f"trial {number + 1:2d}: {result.signal:7s} at {result.at:5.1f}s  delivered={result.delivered}  "
                  f"identical={result.identical}  "
                  f"graded twice={result.graded_twice}  containers left={result.containers_left}  "
                  f"processes left={result.processes_left}  alive 2s after kill={result.alive_after_kill}  "
                  f"{result.seconds:.1f}s", flush=True)
    report(trials, reference)


def report(trials: list[Trial], reference: float) -> None:
    n = len(trials)
    kills = [t.alive_after_kill for t in trials if t.alive_after_kill is not None]
    ratios = [t.seconds / reference for t in trials if t.delivered] or [t.seconds / reference for t in trials]
    print(f"\nsignals delivered while the run was going: {sum(t.delivered for t in trials)}/{n} "
          f"(SIGKILL {sum(t.delivered and t.signal == 'SIGKILL' for t in trials)}, "
          f"SIGTERM {sum(t.delivered and t.signal == 'SIGTERM' for t in trials)})")
    print(f"reports identical to the uninterrupted run: {sum(t.identical for t in trials)}/{n}")
    print(f"instances graded twice: {sum(t.graded_twice for t in trials)}")
    print(f"containers left after the resume: {sum(t.containers_left for t in trials)}")
    print(f"processes left: {sum(t.processes_left for t in trials)}")
    print(f"containers alive 2 s after a SIGKILL, before any reaper: {sum(kills)} over {len(kills)} kill(s)")
    print(f"time of the interrupted trials, killed run + resume vs uninterrupted ({reference:.1f}s): "
          f"median x{statistics.median(ratios):.2f}, max x{max(ratios):.2f}")


if __name__ == "__main__":
    main()
