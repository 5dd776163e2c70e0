"""Replay published mini-swe-agent trajectories through the framework adapter and grade the result.

For each trajectory whose instance has a source in --repos: mini's own DefaultAgent (mini 2.x), the
recorded assistant messages served by `harness.integrations.replay.ReplayModel`, every command run by
`HarnessEnvironment` in the instance's offline environment image. The submission mini extracts
(`git add -A && git diff --cached` after the submit marker) is compared with the published patch
(index lines aside), then all are graded in one `harness eval --predictions` run and each verdict is
compared with the official one. Prints a table (or `--json`); the first observation that differs
from the recorded one says where a replay diverged.

    python bench/bench_replay.py --trajectories DIR --instances lite-test.jsonl --repos SOURCES \\
        [--instance-ids ID ...] [--out DIR] [--json]

DIR holds `<instance_id>.traj.json`, `preds.jsonl` (the published patches) and `verdicts.json`
({instance_id: resolved}).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.integrations.replay import Recording, load_recording, run_replay, same_patch

REPO = Path(__file__).resolve().parents[1]


def read_jsonl(path: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {str(r["instance_id"]): r for r in rows}


def has_source(row: dict[str, Any], repos: Path) -> bool:
    return ((repos / f"{row['instance_id']}.tar.gz").is_file()
            or (repos / str(row["repo"]).replace("/", "__") / ".git").exists())


def grade(rows: list[dict[str, Any]], patches: dict[str, str], repos: Path, out: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds and report.json of one `harness eval --predictions` run through the CLI."""
    instances, preds = out / "instances.jsonl", out / "predictions.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in rows))
    preds.write_text("".join(json.dumps({"instance_id": iid, "model_name_or_path": "replay", "model_patch": patch})
                             + "\n" for iid, patch in patches.items()))
    cmd = [sys.executable, "-m", "harness.cli.main", "eval", "--instances", str(instances), "--repos", str(repos),
           "--predictions", str(preds), "--workers", "1", "--out", str(out / "eval"), "--json",
           "--label", "harness.bench=1"]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    report = out / "eval" / "report.json"
    if not report.is_file():
        raise SystemExit(f"harness eval failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.monotonic() - started, json.loads(report.read_text())


def replay_one(recording: Recording, row: dict[str, Any], args: argparse.Namespace, out: Path,
               published: str) -> dict[str, Any]:
    result = run_replay(recording, instances=out / "instances.jsonl", repos=args.repos,
                        problem_statement=str(row["problem_statement"]),
                        output_path=out / f"{recording.instance_id}.traj.json")
    (out / f"{recording.instance_id}.patch").write_text(result.submission)
    diff = result.first_difference
    replayed = [str(m.get("content")) for m in result.messages if m.get("role") == "user"][1:]
    same = sum(a == b for a, b in zip(recording.observations, replayed, strict=False))
    reordered = sum(a != b and sorted(a.splitlines()) == sorted(b.splitlines())
                    for a, b in zip(recording.observations, replayed, strict=False))
    return {"instance_id": recording.instance_id, "steps": result.steps, "recorded_steps": len(recording.replies),
            "seconds": round(result.seconds, 1), "exit_status": result.exit_status,
            "observations_identical": same, "observations_reordered_only": reordered,
            "observations_recorded": len(recording.observations),
            "patch_identical": same_patch(result.submission, published), "task_message_identical": result.task_matches,
            "first_differing_observation": None if diff is None else
            {"step": diff[0], "recorded": diff[1][:2000], "replayed": diff[2][:2000]},
            "submission": result.submission}


def print_table(results: list[dict[str, Any]]) -> None:
    print("| instance | steps (recorded) | replay wall | patch identical | verdict: ours / official | matched |"
          " observations identical (+ same lines reordered) | first differing |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        diff = r["first_differing_observation"]
        print(f"| {r['instance_id']} | {r['steps']} ({r['recorded_steps']}) | {r['seconds']:.0f} s | "
              f"{'yes' if r['patch_identical'] else 'no'} | {r['ours']} / {r['official']} | "
              f"{'yes' if r['verdict_matched'] else 'no'} | {r['observations_identical']}/{r['observations_recorded']}"
              f" (+{r['observations_reordered_only']}) | {'none' if diff is None else diff['step']} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=Path, required=True, help="folder of <instance_id>.traj.json")
    parser.add_argument("--instances", type=Path, required=True, help="SWE-bench rows (JSON lines)")
    parser.add_argument("--repos", type=Path, required=True, help="sources, as harness eval --repos")
    parser.add_argument("--instance-ids", nargs="*", default=[], help="only these (default: every one with a source)")
    parser.add_argument("--out", type=Path, help="where trajectories, patches and the grading go (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-replay-"))
    out.mkdir(parents=True, exist_ok=True)
    rows, published = read_jsonl(args.instances), read_jsonl(args.trajectories / "preds.jsonl")
    verdicts = json.loads((args.trajectories / "verdicts.json").read_text())
    ids = args.instance_ids or sorted(p.name.removesuffix(".traj.json") for p in args.trajectories.glob("*.traj.json"))
    chosen = [rows[i] for i in ids if i in rows and has_source(rows[i], args.repos)]
    skipped = [i for i in ids if i not in {r["instance_id"] for r in chosen}]
    (out / "instances.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chosen))
    results = []
    for row in chosen:
        iid = row["instance_id"]
        results.append(replay_one(load_recording(args.trajectories, iid), row, args, out,
                                  str(published[iid]["model_patch"])))
        print(f"replayed {iid}: {results[-1]['steps']} steps, {results[-1]['seconds']} s", file=sys.stderr)
    seconds, report = grade(chosen, {r["instance_id"]: r["submission"] for r in results}, args.repos, out)
    for r in results:
        entry = report["instances"][r["instance_id"]] if "instances" in report else {}
        r["ours"] = "resolved" if entry.get("status") == "resolved" else str(entry.get("status", "unknown"))
        r["official"] = "resolved" if verdicts.get(r["instance_id"]) else "unresolved"
        r["verdict_matched"] = (r["ours"] == "resolved") == bool(verdicts.get(r["instance_id"]))
    if args.json:
        print(json.dumps({"results": results, "skipped_without_source": skipped, "grading_seconds": round(seconds, 1),
                          "out": str(out)}, indent=2))
    else:
        print_table(results)
        print(f"\ngraded in {seconds:.0f} s; without a source: {', '.join(skipped) or 'none'}; files in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
