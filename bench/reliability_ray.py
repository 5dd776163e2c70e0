"""bench_reliability.py's Ray trial (`--only ray`): a Ray worker process SIGKILLed while it holds an
instance's containers, in `harness eval tasks/wordcount --model scripted:wordcount-fix --backend ray` on a
real one-node Ray cluster of this machine (`harness.evaluation.ray_cluster.LocalCluster`, 1 CPU: one
instance at a time). Per trial: once a worker of the cluster owns a running container of the run, a
random pause (0 to 3 s: session start, agent loop, mid-command, grading), then SIGKILL of that worker
only (the node, the driver and the rest live on; Ray reruns the instance). Counted 2 s after the kill:
the worker's containers still running, and from the daemon's events how each went: by itself (its
lifeline: `die` then `destroy`) or killed by a removal (`kill`: the rerun's reaper). Then the run ends
(exit code) and what is left of it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from harness.evaluation.ray_cluster import LocalCluster, marked_pids

REPO = Path(__file__).resolve().parents[1]
EVAL = ["eval", "tasks/wordcount", "--model", "scripted:wordcount-fix", "--approve", "deny", "--json"]


def _worker_holding(client: Any, mark: str, cluster: LocalCluster, proc: subprocess.Popen[bytes],
                    timeout: float = 300.0) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        owners = {int(c["Labels"]["harness.pid"]) for c in client.api.containers(filters={"label": mark})}
        held = owners & marked_pids(cluster.id)
        if held:
            return min(held)
        time.sleep(0.05)
    return None


def one_trial(client: Any, cluster: LocalCluster, work: Path, rng: random.Random, events: Any,
              check_after: float) -> dict[str, Any]:
    mark = f"harness.bench.ray={uuid.uuid4().hex[:8]}"
    cmd = [sys.executable, "-m", "harness.cli.main", *EVAL, "--backend", "ray", "--ray-address", cluster.address,
           "--out", str(work / mark.split("=")[1]), "--label", mark]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    trial: dict[str, Any] = {"killed": False}
    try:
        worker = _worker_holding(client, mark, cluster, proc)
        if worker is None:
            trial["note"] = "no worker held a container"
            return trial
        time.sleep(rng.uniform(0.0, 3.0))
        held = client.api.containers(filters={"label": f"harness.pid={worker}"})
        trial["kinds"] = sorted((c.get("Labels") or {}).get("harness.kind", "?") for c in held)
        killed_at = time.time()
        os.kill(worker, signal.SIGKILL)
        trial["killed"] = True
        time.sleep(check_after)
        trial["running_after"] = len(client.api.containers(filters={"label": f"harness.pid={worker}"}))
        trial["left_any_state"] = len(client.api.containers(all=True, filters={"label": f"harness.pid={worker}"}))
        mine = events.of(worker, killed_at)
        trial["force_removed"] = len({(e.get("Actor") or {}).get("ID") for e in mine if e.get("Action") == "kill"})
        destroyed = [e["timeNano"] / 1e9 - killed_at for e in mine if e.get("Action") == "destroy"]
        trial["gone_after"] = max(destroyed) if destroyed else -1.0
        trial["exit"] = proc.wait(600)
        trial["left_of_run"] = len(client.api.containers(all=True, filters={"label": mark}))
        return trial
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def ray_worker_deaths(trials: int, seed: int, deadline: float, check_after: float, events: Any,
                      client: Any) -> dict[str, Any]:
    print("4. a Ray worker SIGKILLed while it holds an instance's containers (`harness eval --backend ray`)")
    rng = random.Random(seed)
    done: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-reliability-ray-") as tmp, \
            LocalCluster(head_cpus=1, head_memory=3 * 1024 ** 3) as cluster:
        for _ in range(trials):
            if time.monotonic() > deadline:
                break
            done.append(one_trial(client, cluster, Path(tmp), rng, events, check_after))
            print(f"  ... {done[-1]}", flush=True)
    killed = [t for t in done if t["killed"]]
    gone = sorted(t["gone_after"] for t in killed if t["gone_after"] >= 0)
    running = sum(t["running_after"] for t in killed)
    print(f"  trials {len(done)} ({len(killed)} killed); containers of the killed worker running {check_after:g} s "
          f"after the kill: {running} (goal 0); any state: {sum(t['left_any_state'] for t in killed)}")
    print(f"  removed by a reaper (a `kill` event first) rather than by their lifeline: "
          f"{sum(t['force_removed'] for t in killed)}; kill to the last destroyed: "
          f"max {max(gone, default=0):.2f} s, median {gone[len(gone) // 2] if gone else 0:.2f} s")
    print(f"  runs that still ended with exit 0 (the instance rerun): {sum(t.get('exit') == 0 for t in killed)}"
          f"/{len(killed)}; containers of the runs left: {sum(t.get('left_of_run', 0) for t in killed)}")
    return {"trials": len(done), "killed": len(killed), "running_after": running, "per_trial": done}
