"""Replay published mini-swe-agent trajectories through both routes and grade the results.

For each trajectory whose instance has a source in --repos, the recorded assistant messages are served
in order, whatever they are sent, and the patch and verdict are compared with the published ones:

- `sandbox`: the agent INSIDE the sandbox, as `harness eval --agent mini-swe-agent==VERSION --model
  replay:DIR` runs it (VERSION: the recording's own, `info.mini_version`): mini's own CLI in the
  instance's offline environment image, its model calls through the gateway, the patch the harness
  extracts, graded by the same run;
- `adapter`: mini on the host (mini 2.x, the `mini` extra), its commands in the sandbox through
  `HarnessEnvironment` (`harness.integrations.replay.run_replay`); its submission graded by one `harness
  eval --predictions` run.

Prints one table (or `--json`): steps (model calls served, and the recording's), the replay's wall
time (in the sandbox: the agent's whole run, and in brackets from its first model call to its last),
patch identical to the published one (index lines aside), the verdict ours / official, and how
many observations are identical to the recorded ones (the first differing one says where a replay
diverged).

    python bench/bench_replay.py --trajectories DIR --instances lite-test.jsonl --repos SOURCES \\
        [--routes sandbox adapter] [--instance-ids ID ...] [--out DIR] [--json]

DIR holds `<instance_id>.traj.json`, `preds.jsonl` (the published patches) and `verdicts.json`
({instance_id: resolved}); SOURCES holds `<instance_id>.tar.gz` or clones `<owner>__<name>`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.integrations.replay import Recording, load_recording, parse_recording, run_replay, same_patch

REPO = Path(__file__).resolve().parents[1]
ROUTES = ("sandbox", "adapter")


def read_jsonl(path: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {str(r["instance_id"]): r for r in rows}


def has_source(row: dict[str, Any], repos: Path) -> bool:
    return ((repos / f"{row['instance_id']}.tar.gz").is_file()
            or (repos / str(row["repo"]).replace("/", "__") / ".git").exists())


def harness_eval(args: list[str], out: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds and report.json of one `harness eval` run through the CLI (one worker)."""
    cmd = [sys.executable, "-m", "harness.cli.main", "eval", *args, "--workers", "1", "--out", str(out), "--json",
           "--label", "harness.bench=1"]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    report = out / "report.json"
    if not report.is_file():
        raise SystemExit(f"harness eval failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.monotonic() - started, json.loads(report.read_text())


def observations(recording: Recording, replayed: list[str]) -> dict[str, Any]:
    """How many of the replay's observations equal the recorded ones (and how many differ only by the
    order of their lines), and the first that differs."""
    pairs = list(zip(recording.observations, replayed, strict=False))
    first = next((n for n, (a, b) in enumerate(pairs, start=1) if a != b), None)
    if first is None and len(recording.observations) != len(replayed):
        first = len(pairs) + 1
    return {"observations_identical": sum(a == b for a, b in pairs),
            "observations_reordered_only": sum(a != b and sorted(a.splitlines()) == sorted(b.splitlines())
                                               for a, b in pairs),
            "observations_recorded": len(recording.observations), "first_differing_observation": first}


def calls_span(calls: Path) -> float | None:
    """Seconds from the first model call the gateway recorded to the last (the agent's own start and the
    last command left out)."""
    if not calls.is_file():
        return None
    times = [datetime.datetime.fromisoformat(json.loads(line)["time"]) for line in calls.read_text().splitlines()
             if line.strip()]
    return round((times[-1] - times[0]).total_seconds(), 1) if times else None


def sandbox_route(recordings: list[Recording], instances: Path, args: argparse.Namespace, out: Path,
                  published: dict[str, dict[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    """All instances in one `harness eval --agent mini-swe-agent==VERSION --model replay:DIR` run."""
    versions = {str(json.loads(r.path.read_text())["info"].get("mini_version")) for r in recordings}
    if not args.agent and len(versions) != 1:
        raise SystemExit(f"the recordings were made by mini-swe-agent {sorted(versions)}; replay one version at a "
                         "time (--instance-ids) or name the agent with --agent")
    agent = args.agent or f"mini-swe-agent=={versions.pop()}"
    seconds, report = harness_eval(["--instances", str(instances), "--repos", str(args.repos), "--agent", agent,
                                    "--model", f"replay:{args.trajectories}"], out)
    results = []
    for recording in recordings:
        iid = recording.instance_id
        folder, entry = out / "instances" / iid, report.get("instances", {}).get(iid, {})
        patch = (folder / "patch.diff").read_text() if (folder / "patch.diff").is_file() else ""
        log = (folder / "agent.log").read_text() if (folder / "agent.log").is_file() else ""
        ran = re.match(r"\[exit (-?\d+)(?: \(timed out\))? after ([0-9.]+) s\]", log)
        trajectory = folder / "mini.traj.json"
        data = json.loads(trajectory.read_text()) if trajectory.is_file() else None
        mine = parse_recording(data, trajectory, iid) if data is not None else None
        results.append({"route": "sandbox", "instance_id": iid, "steps": entry.get("turns"),
                        "recorded_steps": len(recording.replies),
                        "seconds": float(ran.group(2)) if ran else None,
                        "session_seconds": entry.get("durations", {}).get("session"),
                        "calls_seconds": calls_span(folder / "calls.jsonl"),
                        "agent_exit": int(ran.group(1)) if ran else None, "stop_reason": entry.get("stop_reason"),
                        "exit_status": data["info"].get("exit_status") if data is not None else None,
                        "patch_identical": same_patch(patch, str(published[iid]["model_patch"])),
                        "task_message_identical": mine is not None and mine.task_message == recording.task_message,
                        **observations(recording, list(mine.observations) if mine else []),
                        "ours": str(entry.get("status", "missing")), "error": entry.get("error"), "patch": patch})
    return results, seconds


def adapter_route(recordings: list[Recording], rows: dict[str, dict[str, Any]], instances: Path,
                  args: argparse.Namespace, out: Path,
                  published: dict[str, dict[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    """Each recording replayed by mini on the host, then every submission graded in one eval run."""
    results = []
    for recording in recordings:
        iid = recording.instance_id
        try:
            result = run_replay(recording, instances=instances, repos=args.repos,
                                problem_statement=str(rows[iid]["problem_statement"]),
                                output_path=out / f"{iid}.traj.json")
        except Exception as exc:   # a failed environment build: recorded as the row's error, the others go on
            results.append({"route": "adapter", "instance_id": iid, "steps": 0,
                            "recorded_steps": len(recording.replies), "seconds": None, "patch_identical": False,
                            "observations_identical": 0, "observations_reordered_only": 0,
                            "observations_recorded": len(recording.observations),
                            "first_differing_observation": None, "patch": "",
                            "error": f"{type(exc).__name__}: {str(exc)[-400:]}"})
            print(f"adapter: {iid} failed: {type(exc).__name__}", file=sys.stderr)
            continue
        replayed = [str(m.get("content")) for m in result.messages if m.get("role") == "user"][1:]
        results.append({"route": "adapter", "instance_id": iid, "steps": result.steps,
                        "recorded_steps": len(recording.replies), "seconds": round(result.seconds, 1),
                        "exit_status": result.exit_status, "task_message_identical": result.task_matches,
                        "patch_identical": same_patch(result.submission, str(published[iid]["model_patch"])),
                        **observations(recording, replayed[:len(recording.observations) + 1]),
                        "patch": result.submission})
        print(f"adapter: replayed {iid}: {result.steps} steps, {result.seconds:.0f} s", file=sys.stderr)
    preds = out / "predictions.jsonl"
    preds.write_text("".join(json.dumps({"instance_id": r["instance_id"], "model_name_or_path": "replay",
                                         "model_patch": r["patch"]}) + "\n" for r in results))
    seconds, report = harness_eval(["--instances", str(instances), "--repos", str(args.repos),
                                    "--predictions", str(preds)], out / "eval")
    for r in results:
        entry = report.get("instances", {}).get(r["instance_id"], {})
        r["ours"], r["error"] = str(entry.get("status", "missing")), r.get("error") or entry.get("error")
    return results, seconds


def print_table(results: list[dict[str, Any]]) -> None:
    print("| route | instance | steps (recorded) | replay wall | patch identical | verdict: ours / official | matched |"
          " observations identical (+ same lines reordered) | first differing |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        wall = "n/a" if r["seconds"] is None else f"{r['seconds']:.0f} s"
        if r.get("calls_seconds") is not None:
            wall += f" ({r['calls_seconds']:.0f} s)"
        print(f"| {r['route']} | {r['instance_id']} | {r['steps']} ({r['recorded_steps']}) | {wall} | "
              f"{'yes' if r['patch_identical'] else 'no'} | {r['ours']} / {r['official']} | "
              f"{'yes' if r['verdict_matched'] else 'no'} | {r['observations_identical']}/{r['observations_recorded']}"
              f" (+{r['observations_reordered_only']}) | {r['first_differing_observation'] or 'none'} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=Path, required=True, help="folder of <instance_id>.traj.json")
    parser.add_argument("--instances", type=Path, required=True, help="SWE-bench rows (JSON lines)")
    parser.add_argument("--repos", type=Path, required=True, help="sources, as harness eval --repos")
    parser.add_argument("--routes", nargs="+", choices=ROUTES, default=list(ROUTES), help="default: both")
    parser.add_argument("--agent", default="", help="the in-sandbox agent (default: mini-swe-agent==<recorded>)")
    parser.add_argument("--instance-ids", nargs="*", default=[], help="only these (default: every one with a source)")
    parser.add_argument("--out", type=Path, help="where trajectories, patches and the grading go (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args()
    args.trajectories, args.repos = args.trajectories.resolve(), args.repos.resolve()
    out = (args.out or Path(tempfile.mkdtemp(prefix="bench-replay-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows, published = read_jsonl(args.instances), read_jsonl(args.trajectories / "preds.jsonl")
    verdicts = json.loads((args.trajectories / "verdicts.json").read_text())
    ids = args.instance_ids or sorted(p.name.removesuffix(".traj.json") for p in args.trajectories.glob("*.traj.json"))
    chosen = [rows[i] for i in ids if i in rows and has_source(rows[i], args.repos)]
    skipped = [i for i in ids if i not in {r["instance_id"] for r in chosen}]
    instances = out / "instances.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in chosen))
    recordings = [load_recording(args.trajectories, r["instance_id"]) for r in chosen]
    results, grading = [], {}
    for route in args.routes:
        where = out / route
        where.mkdir(exist_ok=True)
        found, grading[route] = (sandbox_route(recordings, instances, args, where, published) if route == "sandbox"
                                 else adapter_route(recordings, rows, instances, args, where, published))
        results += found
    for r in results:
        r["official"] = "resolved" if verdicts.get(r["instance_id"]) else "unresolved"
        r["verdict_matched"] = (r["ours"] == "resolved") == bool(verdicts.get(r["instance_id"]))
    if args.json:
        print(json.dumps({"results": results, "skipped_without_source": skipped,
                          "eval_seconds": {k: round(v, 1) for k, v in grading.items()}, "out": str(out)}, indent=2))
    else:
        print_table(results)
        print(f"\nharness eval wall time: {', '.join(f'{k} {v:.0f} s' for k, v in grading.items())}; "
              f"without a source: {', '.join(skipped) or 'none'}; files in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
