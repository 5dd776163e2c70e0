"""Environments per version, measured on real rows: how many environment builds a run pays per instance
(goal: one per version), what an instance of an already-built version costs beyond its tests (goal:
<= 15 s), and whether one instance's lock and environment image tag are the same when made on two
clean caches (goal: identical).

The rows run through the library's batch runner, one worker, in the file's order, gold (and `--empty`:
the empty patch too), every build the run makes counted from its progress messages. The first
instance of each version pays its version's environment (unless the image exists from an earlier run:
then the run builds none); the others only their instance layer, their sandboxes and their tests.
Printed: builds per instance, the time beyond the tests of the instances of an already-built version
(median, max) beside that of the first instance of each version (the same run's baseline), and
gold / empty verdicts. With `--hash ID`, the lock of instance ID is made twice in two subprocesses,
each with an empty cache folder (XDG_CACHE_HOME), without the shipped locks, and the two locks' digests
and environment image tags are printed.

    .venv/bin/python bench/bench_envs.py --instances FILE --repos DIR [--per-version 3] [--versions 2]
        [--repo django/django ...] [--empty] [--hash ID] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.config import load  # noqa: E402
from harness.evaluation.instance_files import load_instances, read_jsonl  # noqa: E402
from harness.evaluation.options import EvalOptions  # noqa: E402
from harness.evaluation.progress import SilentEvents  # noqa: E402
from harness.evaluation.runner import run_evaluation  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402

HASH_SCRIPT = """
import hashlib, json, sys
from pathlib import Path
from harness.config import Config
from harness.environments import sandbox_image
from harness.environments.locking import lock_identity, make_lock
from harness.environments.venv_image import venv_tag
from harness.evaluation.instance_files import load_instances
[task] = load_instances(Path(sys.argv[1]), Path(sys.argv[2]), [sys.argv[3]])
base = sandbox_image(Config(), task.python, task=task)
key, recipe = lock_identity(task, task.environment)
lock = make_lock(task, task.environment, key, recipe, base)
print(json.dumps({"lock": hashlib.sha256(lock.text().encode()).hexdigest(),
                  "tag": venv_tag(lock, base), "packages": len(lock.packages), "as_of": lock.inputs.as_of}))
"""


class Recorder(SilentEvents):
    def __init__(self) -> None:
        self.said: list[str] = []

    def message(self, text: str) -> None:
        self.said.append(text)


def sample(rows: list[dict[str, Any]], per_version: int, versions: int, repos: list[str]) -> list[dict[str, Any]]:
    taken: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        key = (str(row.get("repo")), str(row.get("version")))
        if repos and key[0] not in repos:
            continue
        if key in taken or len(taken) < versions:
            if len(taken[key]) < per_version:
                taken[key].append(row)
    return [r for rows_of in taken.values() for r in rows_of]


def evaluate(rows: list[dict[str, Any]], repos: Path, out: Path, model: str) -> tuple[dict[str, Any], list[str]]:
    instances = out / "sample.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = load_instances(instances, repos)
    config, secrets = load({})
    events = Recorder()
    options = EvalOptions(out_dir=out / model, model=model, workers=1, labels={"harness.bench": "1"})
    report = run_evaluation(tasks, options, config, secrets, events=events).to_dict()
    return report, events.said


def container_seconds(image: str, runs: int = 3) -> float:
    """The median wall time of `docker run --rm` of `image` running `true`: how fast this machine starts and
    removes a container right now (the baseline the costs are divided by)."""
    times = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run(["docker", "run", "--rm", "--network", "none", "--label", "harness.bench=1", image, "true"],
                       check=True, capture_output=True)
        times.append(time.monotonic() - started)
    return statistics.median(times)


def costs(rows: list[dict[str, Any]], report: dict[str, Any], said: list[str], baseline: float) -> None:
    for line in said:
        if ": time: " in line or ": host: " in line:     # where an instance layer's build time went
            print(f"  {line}")
    builds = [s for s in said if "building environment harness-env:venv-" in s]
    layers = [s for s in said if "building instance harness-env:inst-" in s]
    print(f"\n{len(rows)} instance(s) of {len({(r['repo'], r['version']) for r in rows})} version(s): "
          f"{len(builds)} environment build(s) ({len(builds) / max(1, len(rows)):.2f} per instance), "
          f"{len(layers)} instance layer(s)")
    seen: set[tuple[str, str]] = set()
    first, again = [], []
    for row in rows:
        entry = report["instances"].get(row["instance_id"], {})
        if entry.get("status") in (None, "error", "unsupported"):
            print(f"  {row['instance_id']}: {entry.get('status')}: {str(entry.get('error'))[:200]}")
            continue
        parts = entry.get("durations", {})
        beyond = entry["duration"] - parts.get("tests", 0.0)
        version = (row["repo"], row["version"])
        (again if version in seen else first).append(beyond)
        seen.add(version)
        print(f"  {row['instance_id']:38} {entry['status']:12} total {entry['duration']:6.1f}s tests "
              f"{parts.get('tests', 0.0):6.1f}s beyond {beyond:6.1f}s (environment {parts.get('environment', 0):5.1f}, "
              f"instance {parts.get('instance', 0):5.1f}, grading {parts.get('grading', 0):5.1f})")
    print(f"baseline: one `docker run --rm` of the sandbox image takes {baseline:.1f} s on this machine now")
    if again:
        print(f"time beyond the tests, an instance of an already-built version: median "
              f"{statistics.median(again):.1f} s, max {max(again):.1f} s over {len(again)} instance(s) (goal <= 15 s); "
              f"{statistics.median(again) / baseline:.1f} container starts")
    if first:
        print(f"time beyond the tests, the first instance of each version (its build, if any, included): median "
              f"{statistics.median(first):.1f} s" + (f"; ratio already-built / first = "
                                                      f"{statistics.median(again) / statistics.median(first):.2f}"
                                                      if again else ""))


def same_hash(instances: Path, repos: Path, iid: str) -> None:
    results = []
    for n in (1, 2):
        with tempfile.TemporaryDirectory(prefix=f"bench-envs-cache{n}-") as cache:
            started = time.monotonic()
            env = {**os.environ, "XDG_CACHE_HOME": cache, "PYTHONPATH": str(REPO)}
            proc = subprocess.run([sys.executable, "-c", HASH_SCRIPT, str(instances), str(repos), iid], env=env,
                                  capture_output=True, text=True, cwd=REPO)
            if proc.returncode != 0:
                raise SystemExit(f"making the lock of {iid} in a clean cache failed:\n{proc.stderr[-3000:]}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"clean cache {n}: lock {results[-1]['lock'][:16]}, image {results[-1]['tag']}, "
                  f"{results[-1]['packages']} distributions as of {results[-1]['as_of']} "
                  f"({time.monotonic() - started:.0f} s)")
    print(f"{iid}: the two clean caches give {'the same' if results[0] == results[1] else 'DIFFERENT'} "
          f"lock and environment image tag")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=Path, required=True)
    parser.add_argument("--repos", type=Path, required=True)
    parser.add_argument("--per-version", type=int, default=3)
    parser.add_argument("--versions", type=int, default=2)
    parser.add_argument("--repo", action="append", default=[])
    parser.add_argument("--empty", action="store_true", help="grade the empty patch too")
    parser.add_argument("--hash", help="an instance whose lock is made on two clean caches")
    parser.add_argument("--out", type=Path, default=Path("runs") / f"bench-envs-{int(time.time())}")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.hash:
        same_hash(args.instances, args.repos, args.hash)
    rows = sample(read_jsonl(args.instances, "instances"), args.per_version, args.versions, args.repo)
    if not rows:
        return
    baseline = container_seconds(ensure_image(python="3.9"))
    gold, said = evaluate(rows, args.repos, args.out, "gold")
    costs(rows, gold, said, (baseline + container_seconds(ensure_image(python="3.9"))) / 2)
    verdicts = [f"gold resolved {gold['resolved_instances']}/{len(rows)}"]
    if args.empty:
        empty, _ = evaluate(rows, args.repos, args.out, "empty")
        verdicts.append(f"empty resolved {empty['resolved_instances']}/{len(rows)}")
    print("; ".join(verdicts) + f"; reports under {args.out}")


if __name__ == "__main__":
    main()
