"""Stop and resume of `harness eval --backend ray`, measured: the shipped tasks (tasks/*) with --model gold on
a real two-node Ray cluster of this machine (a head and a worker node, 1 CPU each: two instances at a
time), interrupted at a random moment and resumed to completion, against an uninterrupted Ray run of the
same process. The interruptions rotate: SIGINT once (a drain: the running instances finish), SIGTERM
twice 0.5 s apart (a cancel), SIGKILL of the driver (Ray then ends the job's workers, and their containers
go with them).

    .venv/bin/python bench/bench_ray_resume.py [--trials 12] [--seed 1] [--stops SIGINT,SIGTERMx2,SIGKILL]
        [--earliest 3]

Prints per trial and over the trials: reports identical to the uninterrupted run's (statuses, counts, id
lists; times ignored), instances graded twice, containers of the run left after the stop (checked 2 s
after it ended) and after the resume, processes left. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import docker
from bench_eval_resume import ROOT, TASKS, containers, graded_more_than_once, processes, stamps, verdicts

sys.path.insert(0, str(ROOT))

from harness.evaluation.ray_cluster import LocalCluster  # noqa: E402

NODE_MEMORY = 3 * 1024 ** 3
STOPS = ("SIGINT", "SIGTERMx2", "SIGKILL")


def command(out: Path, label: str, address: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli.main", "eval", *map(str, TASKS), "--model", "gold", "--backend", "ray",
            "--ray-address", address, "--out", str(out), "--label", "harness.bench=ray-resume", "--label",
            f"eval.bench.run={label}", "--json"]


def launch(cmd: list[str]) -> subprocess.Popen[str]:
    # SIGINT at its default in the child, as under a terminal, even when this script runs in the background
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def interrupt(proc: subprocess.Popen[str], stop: str) -> None:
    if stop == "SIGINT":
        proc.send_signal(signal.SIGINT)
    elif stop == "SIGTERMx2":
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGKILL)


def trial(number: int, where: Path, client: docker.DockerClient, address: str, stop: str, at: float,
          expected: dict[str, Any]) -> dict[str, Any]:
    out, label = where / f"trial-{number}", f"ray-trial-{number}"
    cmd = command(out, label, address)
    proc = launch(cmd)
    delivered = False
    try:
        proc.wait(timeout=at)
    except subprocess.TimeoutExpired:
        interrupt(proc, stop)
        delivered = True
    _, err = proc.communicate(timeout=900)
    time.sleep(2.0)
    after_stop = containers(client, label)
    before = stamps(out) if (out / "instances").is_dir() else {}
    resumed = subprocess.run(cmd + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    identical = resumed.returncode == 0 and verdicts(json.loads(resumed.stdout)) == expected
    return {"stop": stop, "at": round(at, 1), "delivered": delivered, "exit": proc.returncode,
            "finished_before_resume": len(before), "identical": identical,
            "graded_twice": graded_more_than_once(out, before), "containers_after_stop": after_stop,
            "containers_after_resume": containers(client, label), "processes_left": processes(out),
            "drained": "stopped: the running instances finished" in err}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stops", default=",".join(STOPS), help=f"the stops to rotate, among {','.join(STOPS)}")
    parser.add_argument("--earliest", type=float, default=3.0, help="seconds after the start of the earliest stop")
    args = parser.parse_args()
    stops = [s for s in args.stops.split(",") if s]
    if not stops or set(stops) - set(STOPS):
        parser.error(f"--stops {args.stops!r}: expected a comma-separated subset of {','.join(STOPS)}")
    rng = random.Random(args.seed)
    client = docker.from_env()
    with tempfile.TemporaryDirectory(prefix="bench-ray-resume-") as tmp, \
            LocalCluster(head_cpus=1, head_memory=NODE_MEMORY) as cluster:
        cluster.add_node("worker", cpus=1, memory=NODE_MEMORY)
        where = Path(tmp)
        for run in ("warm", "whole"):     # the first builds what the environments need; the second is timed
            t0 = time.monotonic()
            whole = subprocess.run(command(where / run, run, cluster.address), cwd=ROOT, capture_output=True,
                                   text=True, timeout=3600)
            reference = time.monotonic() - t0
        if whole.returncode != 0:
            sys.exit(f"the uninterrupted run failed ({whole.returncode}):\n{whole.stderr[-3000:]}")
        expected = verdicts(json.loads(whole.stdout))
        print(f"uninterrupted on Ray: {len(TASKS)} tasks, 2 nodes of 1 CPU, {reference:.1f}s", flush=True)
        trials = []
        for number in range(args.trials):
            stop = stops[number % len(stops)]
            at = rng.uniform(args.earliest, max(args.earliest, 0.75 * reference))
            result = trial(number, where, client, cluster.address, stop, at, expected)
            trials.append(result)
            print(f"trial {number + 1:2d}: {result}", flush=True)
    report(trials)


def report(trials: list[dict[str, Any]]) -> None:
    n = len(trials)
    print(f"\nstops delivered while the run was going: {sum(t['delivered'] for t in trials)}/{n} "
          + ", ".join(f"{s} {sum(t['delivered'] and t['stop'] == s for t in trials)}" for s in STOPS))
    print(f"SIGINT runs that drained (running instances finished, exit 130): "
          f"{sum(t['drained'] and t['exit'] == 130 for t in trials if t['stop'] == 'SIGINT' and t['delivered'])}"
          f"/{sum(t['stop'] == 'SIGINT' and t['delivered'] for t in trials)}")
    print(f"reports identical to the uninterrupted run after --resume: {sum(t['identical'] for t in trials)}/{n}")
    print(f"instances graded twice: {sum(t['graded_twice'] for t in trials)}")
    print(f"containers of the run 2 s after the stop ended: {sum(t['containers_after_stop'] for t in trials)}; "
          f"after the resume: {sum(t['containers_after_resume'] for t in trials)}")
    print(f"processes left: {sum(t['processes_left'] for t in trials)}")


if __name__ == "__main__":
    main()
