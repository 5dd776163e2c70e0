"""Scheduling overhead per instance of the Ray backend against the local backend, in the same run.

Starts a real Ray cluster on this machine (a head and one worker node, 1 CPU each), then measures:

1. dispatch: N no-op items with one sandbox's resources, through `run_on_ray` and through a thread
   pool of the same width (2); the wall time per item is the pure cost of scheduling and returning.
2. evaluation: `harness eval`'s runner on the shipped tasks with --model gold, local backend with
   --workers 2, then Ray backend on the two nodes. Per instance, the overhead is the slot time not
   spent inside instances: (wall x slots - sum of instance durations) / instances.

Usage: .venv/bin/python bench/bench_ray.py [--noop 40] [--tasks tasks/] [--skip-eval]
Prints the figures; asserts nothing about them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.config import load  # noqa: E402
from harness.core.task import find_task_dirs, load_task  # noqa: E402
from harness.evaluation.options import EvalOptions  # noqa: E402
from harness.evaluation.ray_backend import Outcome, run_on_ray  # noqa: E402
from harness.evaluation.ray_cluster import LocalCluster, keep_loopback  # noqa: E402
from harness.evaluation.ray_resources import TaskResources  # noqa: E402
from harness.evaluation.runner import run_evaluation  # noqa: E402

SLOTS = 2
NODE_MEMORY = 3 * 1024 ** 3


def noop(item: int) -> int:
    return item


def dispatch(address: str, n: int) -> dict[str, float]:
    import ray  # noqa: PLC0415 - optional extra (pip install 'harness[ray]'), imported only when the benchmark runs
    t0 = time.perf_counter()
    with keep_loopback():   # the cluster listens on 127.0.0.1 only; Ray would rewrite that address
        ray.init(address=address, logging_level="WARNING", log_to_driver=False, namespace="harness")
    connect = time.perf_counter() - t0
    arrived: list[Outcome[int, int]] = []
    try:
        run_on_ray(noop, list(range(3)), address=address, resources_per_item=TaskResources(1.0, 256 * 1024 ** 2),
                   max_retries=0, on_result=arrived.append)           # warm the worker processes
        t0 = time.perf_counter()
        run_on_ray(noop, list(range(n)), address=address, resources_per_item=TaskResources(1.0, 256 * 1024 ** 2),
                   max_retries=0, on_result=arrived.append)
        on_ray = time.perf_counter() - t0
    finally:
        ray.shutdown()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=SLOTS) as pool:
        list(pool.map(noop, range(n)))
    local = time.perf_counter() - t0
    return {"connect_s": connect, "ray_per_item_ms": on_ray / n * 1000, "local_per_item_ms": local / n * 1000}


def evaluate(tasks_dir: Path, backend: str, address: str, out: Path) -> dict[str, Any]:
    config, secrets = load()
    tasks = [load_task(d) for d in find_task_dirs([tasks_dir])]
    options = EvalOptions(out_dir=out, model="gold", workers=SLOTS, labels={"harness.bench": "1"},
                          backend=backend, ray_address=address if backend == "ray" else None)
    t0 = time.perf_counter()
    report = run_evaluation(tasks, options, config, secrets).to_dict()
    wall = time.perf_counter() - t0
    inside = sum(r["duration"] for r in report["instances"].values())
    n = len(report["instances"])
    return {"backend": backend, "instances": n, "wall_s": wall, "inside_s": inside,
            "overhead_per_instance_s": (wall * SLOTS - inside) / n,
            "statuses": sorted((i, r["status"]) for i, r in report["instances"].items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--noop", type=int, default=40, help="no-op items in the dispatch measure")
    parser.add_argument("--tasks", type=Path, default=REPO / "tasks", help="task directories to evaluate")
    parser.add_argument("--skip-eval", action="store_true", help="only the dispatch measure")
    args = parser.parse_args()
    with LocalCluster(head_cpus=1, head_memory=NODE_MEMORY) as cluster:
        cluster.add_node("worker-1", cpus=1, memory=NODE_MEMORY)
        figures = dispatch(cluster.address, args.noop)
        print(f"dispatch of {args.noop} no-op items, {SLOTS} slots: connect {figures['connect_s']:.2f}s once; "
              f"per item ray {figures['ray_per_item_ms']:.1f} ms, local threads "
              f"{figures['local_per_item_ms']:.3f} ms")
        if args.skip_eval:
            return 0
        with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
            evaluate(args.tasks, "local", "", Path(tmp) / "warm")     # environment images built once
            rows = [evaluate(args.tasks, b, cluster.address, Path(tmp) / b) for b in ("local", "ray")]
    for row in rows:
        print(f"eval {row['backend']:5}: {row['instances']} instances, wall {row['wall_s']:.1f}s, inside "
              f"instances {row['inside_s']:.1f}s, overhead per instance {row['overhead_per_instance_s']:.2f}s")
    same = rows[0]["statuses"] == rows[1]["statuses"]
    extra = rows[1]["overhead_per_instance_s"] - rows[0]["overhead_per_instance_s"]
    print(f"ray minus local: {extra:+.2f}s per instance; verdicts identical: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
