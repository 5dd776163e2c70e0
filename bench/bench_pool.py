"""Sandbox start to first command: started on demand, against taken from a warm pool; and
`harness eval` with and without `--pool`.

    .venv/bin/python bench/bench_pool.py [--rounds 20] [--pool 2]
    .venv/bin/python bench/bench_pool.py --eval [--repeat 3]

Fresh: `DockerSandbox.start()` then `true` through the channel (what every session paid). Pooled:
`WarmPool.take()` then the same `true`, with the pool refilled in the background between takes
(a pause of 1 s, a model's first turn being longer). Prints p50/p95 of both, `docker run` of `true`
for scale, and the goals: <= 250 ms started, <= 20 ms from a warm pool.

With --eval: `harness eval --model gold` of the shipped tasks (one worker), alternately without a pool
and with `--pool 1`, --repeat times each (images built before the first timed run); prints the
wall time of each run, the per-instance median of the session and grading stages, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.api import SandboxSpec  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402
from sandbox.pool import docker_pool  # noqa: E402


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pool", type=int, default=2)
    parser.add_argument("--eval", action="store_true", help="time harness eval with and without --pool 1")
    parser.add_argument("--repeat", type=int, default=3, help="with --eval: timed runs of each")
    args = parser.parse_args()
    if args.eval:
        return eval_pool(args.repeat)
    image = ensure_image(python="3.11")

    def spec() -> SandboxSpec:
        return SandboxSpec(image=image, session=f"bench-{uuid.uuid4().hex[:8]}", labels={"harness.bench": "1"})

    fresh: list[float] = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        box = DockerSandbox(spec())
        box.start()
        box.exec("true", timeout=10)
        fresh.append(time.perf_counter() - started)
        box.close()
    pooled: list[float] = []
    pool = docker_pool(spec, args.pool)
    try:
        pool.wait_ready(timeout=120)
        for _ in range(args.rounds):
            pool.wait_ready(timeout=120)
            time.sleep(1.0)
            started = time.perf_counter()
            box = pool.take()
            box.exec("true", timeout=10)
            pooled.append(time.perf_counter() - started)
            box.close()
    finally:
        pool.close()
    runs: list[float] = []
    for _ in range(max(5, args.rounds // 2)):
        started = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True,
                       capture_output=True)
        runs.append(time.perf_counter() - started)
    print(f"start to first command, {args.rounds} sandboxes each")
    for label, values in (("started on demand", fresh), (f"from a warm pool of {args.pool}", pooled),
                          ("`docker run --rm ... true`", runs)):
        print(f"  {label:<30} p50 {_pct(values, 0.5) * 1000:8.1f} ms   p95 {_pct(values, 0.95) * 1000:8.1f} ms")
    p50_fresh, p50_pool = _pct(fresh, 0.5) * 1000, _pct(pooled, 0.5) * 1000
    print(f"started on demand: {p50_fresh:.0f} ms at p50 (goal <= 250 ms: {'met' if p50_fresh <= 250 else 'NOT met'}); "
          f"from the pool: {p50_pool:.1f} ms (goal <= 20 ms: {'met' if p50_pool <= 20 else 'NOT met'}), "
          f"{p50_fresh / p50_pool:.0f}x faster")
    return 0


HARNESS = str(Path(sys.executable).with_name("harness"))


def _eval_run(pool: int, where: Path) -> dict[str, float]:
    out = where / f"eval-pool{pool}-{uuid.uuid4().hex[:6]}"
    started = time.perf_counter()
    done = subprocess.run([HARNESS, "eval", "--model", "gold", "--pool", str(pool), "--out", str(out), "--json"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"harness eval failed (exit {done.returncode}): {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    records = [json.loads(f.read_text()) for f in out.glob("instances/*/done")]
    return {"wall": wall, "resolved": report["resolved_instances"], "instances": len(records),
            "session": statistics.median(r["durations"]["session"] for r in records),
            "grading": statistics.median(r["durations"]["grading"] for r in records),
            "tests": statistics.median(r["durations"]["tests"] for r in records)}


def eval_pool(repeat: int) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as tmp:
        where = Path(tmp)
        _eval_run(0, where)   # builds what the tasks need, untimed
        runs: dict[int, list[dict[str, float]]] = {0: [], 1: []}
        for _ in range(repeat):
            for pool in (0, 1):
                runs[pool].append(_eval_run(pool, where))
                r = runs[pool][-1]
                print(f"  --pool {pool}: {r['wall']:6.2f} s for {r['instances']:.0f} instances "
                      f"({r['resolved']:.0f} resolved); per instance median: session {r['session']:.2f} s, "
                      f"grading {r['grading']:.2f} s (of which tests {r['tests']:.2f} s)")
    med = {p: {k: statistics.median(r[k] for r in rs) for k in ("wall", "session", "grading")}
           for p, rs in runs.items()}
    print(f"harness eval --model gold, shipped tasks, median of {repeat}: without a pool {med[0]['wall']:.2f} s, "
          f"with --pool 1 {med[1]['wall']:.2f} s ({med[0]['wall'] / med[1]['wall']:.2f}x); grading stage "
          f"{med[0]['grading']:.2f} -> {med[1]['grading']:.2f} s per instance, session stage "
          f"{med[0]['session']:.2f} -> {med[1]['session']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
