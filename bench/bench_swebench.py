"""Real SWE-bench rows, unmodified, through `harness eval`: gold must resolve, empty must not.

A sample of SWE-bench Lite (the shared test and dev rows), a few instances per repository, is run
twice through the CLI as a researcher runs it, `--model gold` then `--model empty`, with the sources
from `--repos DIR` (tarballs `<instance_id>.tar.gz` or git clones `<owner>__<name>` holding the base
commits). Printed:

- the per-repository table: attempted, gold resolved, unsupported, errors, empty resolved;
- the gold resolve rate over the pure-Python instances attempted (target >= 95%) and every gold
  failure with its cause (the error, or the FAIL_TO_PASS / PASS_TO_PASS tests that failed);
- cost: environment build time per (repo, version), the per-instance overhead beyond the test run
  (the goal: a second instance of an already built version adds < 15 s beyond its tests), instances
  per hour with --workers, and that rate extrapolated to all of SWE-bench Lite (300 instances).

With `--predictions FILE --verdicts FILE` it also grades a published system's predictions and
compares each verdict with the published one (`verdicts.json`: {"resolved": [ids], ...}).

    .venv/bin/python bench/bench_swebench.py --repos DIR [--per-repo 5] [--compiled 2] [--workers 2]
        [--repo django/django ...] [--out DIR] [--predictions FILE --verdicts FILE [--published-per-repo 3]]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "swebench"
PURE = ("django/django", "sympy/sympy", "pytest-dev/pytest", "sphinx-doc/sphinx", "pylint-dev/pylint",
        "pydata/xarray", "mwaskom/seaborn", "pallets/flask", "psf/requests", "pvlib/pvlib-python",
        "pydicom/pydicom", "pyvista/pyvista")
COMPILED = ("astropy/astropy", "matplotlib/matplotlib", "scikit-learn/scikit-learn")
LITE_SIZE = 300


def rows_with_sources(repos: Path) -> list[dict[str, Any]]:
    """The shared Lite rows (test, then dev) whose source is in `repos`."""
    rows = []
    for name in ("lite-test.jsonl", "lite-dev.jsonl"):
        rows += [json.loads(line) for line in (SHARED / name).read_text().splitlines() if line.strip()]
    return [r for r in rows if has_source(r, repos)]


def has_source(row: dict[str, Any], repos: Path) -> bool:
    if (repos / f"{row['instance_id']}.tar.gz").is_file():
        return True
    clone = repos / row["repo"].replace("/", "__")
    if not (clone / ".git").exists():
        return False
    probe = subprocess.run(["git", "-C", str(clone), "cat-file", "-e", f"{row['base_commit']}^{{commit}}"],
                           capture_output=True)
    return probe.returncode == 0


def complete(row: dict[str, Any], repos: Path) -> bool:
    """The source of `row` can be extracted whole (a mirror may lack its largest blobs: pvlib's data files)."""
    clone = repos / row["repo"].replace("/", "__")
    if (repos / f"{row['instance_id']}.tar.gz").is_file() or not (clone / ".git").exists():
        return True
    probe = subprocess.run(["git", "-C", str(clone), "archive", "--format=tar", row["base_commit"]],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if probe.returncode != 0:
        print(f"skipped {row['instance_id']}: its source in {clone} is incomplete "
              f"({probe.stderr.strip().splitlines()[0] if probe.stderr.strip() else 'git archive failed'})")
    return probe.returncode == 0


def sample(rows: list[dict[str, Any]], per_repo: int, compiled: int, only: list[str],
           repos: Path | None = None) -> list[dict[str, Any]]:
    """The first instances of each repository in dataset order: `per_repo` of a pure-Python one,
    `compiled` of a compiled one."""
    taken: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        repo = row["repo"]
        if only and repo not in only:
            continue
        cap = per_repo if repo in PURE else compiled if repo in COMPILED else 0
        if len(taken[repo]) < cap and (repos is None or complete(row, repos)):
            taken[repo].append(row)
    return [r for repo in sorted(taken) for r in taken[repo]]


def harness_eval(instances: Path, repos: Path, out: Path, workers: int, *model: str) -> tuple[float, dict[str, Any]]:
    """Wall seconds and report.json of one `harness eval` run through the CLI."""
    cmd = [sys.executable, "-m", "harness.cli.main", "eval", "--instances", str(instances), "--repos", str(repos),
           *model, "--workers", str(workers), "--out", str(out), "--json", "--label", "harness.bench=1"]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - started
    report_file = out / "report.json"
    if not report_file.is_file():
        raise SystemExit(f"harness eval failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, json.loads(report_file.read_text())


def failure_cause(out: Path, iid: str, entry: dict[str, Any]) -> str:
    if entry.get("error"):
        return str(entry["error"]).splitlines()[0][:300]
    report = out / "instances" / iid / "report.json"
    if not report.is_file():
        return entry["status"]
    tests = json.loads(report.read_text())[iid].get("tests_status", {})
    failed = [f"{kind}: {t}" for kind in ("FAIL_TO_PASS", "PASS_TO_PASS")
              for t in tests.get(kind, {}).get("failure", [])]
    return f"{entry['status']}; " + ("; ".join(failed[:6]) + (" ..." if len(failed) > 6 else "") if failed
                                     else "no failing test recorded")


def print_table(chosen: list[dict[str, Any]], gold: dict[str, Any], empty: dict[str, Any]) -> None:
    by_repo: dict[str, list[str]] = defaultdict(list)
    for row in chosen:
        by_repo[row["repo"]].append(row["instance_id"])
    print(f"{'repository':28} {'kind':9} {'tried':>5} {'gold ok':>7} {'unsup':>5} {'errors':>6} {'empty ok':>8}")
    for repo, ids in sorted(by_repo.items()):
        def count(report: dict[str, Any], status: str, ids: list[str] = ids) -> int:
            return sum(1 for i in ids if report["instances"].get(i, {}).get("status") == status)
        kind = "pure" if repo in PURE else "compiled"
        print(f"{repo:28} {kind:9} {len(ids):5} {count(gold, 'resolved'):7} {count(gold, 'unsupported'):5} "
              f"{count(gold, 'error'):6} {count(empty, 'resolved'):8}")


def print_costs(gold: dict[str, Any], seconds: float, workers: int, chosen: list[dict[str, Any]]) -> None:
    instances = gold["instances"]
    env_builds: dict[str, float] = {}
    overheads_first, overheads_again = [], []
    keys = {r["instance_id"]: f"{r['repo']} {r['version']}" for r in chosen}
    seen: set[str] = set()
    for iid in sorted(instances, key=lambda i: instances[i]["duration"]):
        entry = instances[iid]
        if entry["status"] in ("error", "unsupported"):
            continue
        parts = entry.get("durations", {})
        key = keys.get(iid, "?")
        env_builds[key] = max(env_builds.get(key, 0.0), parts.get("environment", 0.0))
        if key in seen:   # the shared environment exists (or is being built by another worker: not counted)
            overheads_again.append(entry["duration"] - parts.get("tests", 0.0) - parts.get("environment", 0.0))
        else:
            overheads_first.append(entry["duration"] - parts.get("tests", 0.0))
        seen.add(key)
    print("\nenvironment build time per (repo, version), seconds (the slowest instance of each waited for it):")
    for key, value in sorted(env_builds.items()):
        print(f"  {key:40} {value:8.1f}")
    if overheads_again:
        print(f"per-instance overhead beyond its tests, a version already built: median "
              f"{statistics.median(overheads_again):.1f} s, max {max(overheads_again):.1f} s "
              f"over {len(overheads_again)} instance(s) (goal < 15 s)")
    if overheads_first:
        print(f"per-instance overhead, first instance of its version (build included): median "
              f"{statistics.median(overheads_first):.1f} s")
    done = len([i for i in instances.values() if i["status"] not in ("error",)])
    rate = done / seconds * 3600 if seconds else 0.0
    print(f"throughput: {done} instances in {seconds:.0f} s with {workers} worker(s) = {rate:.1f} instances/hour")
    if env_builds and overheads_again:
        per_instance = statistics.median(overheads_again) + statistics.median(
            [v.get("durations", {}).get("tests", 0.0) for v in instances.values()] or [0.0])
        lite = [json.loads(line) for line in (SHARED / "lite-test.jsonl").read_text().splitlines() if line.strip()]
        lite_envs = len({(r["repo"], r["version"]) for r in lite})    # environments the split needs
        estimate = (lite_envs * statistics.median(env_builds.values()) + LITE_SIZE * per_instance) / workers
        print(f"extrapolated to SWE-bench Lite ({LITE_SIZE} instances, {lite_envs} environments): "
              f"~{estimate / 3600:.1f} h with {workers} worker(s) on this machine")


def published(args: argparse.Namespace, out: Path) -> None:
    verdicts = json.loads(Path(args.verdicts).read_text())
    resolved_published = set(verdicts.get("resolved", []))
    rows = [json.loads(line) for line in Path(args.predictions).read_text().splitlines() if line.strip()]
    ids = sorted({r["instance_id"] for r in rows})
    source_rows = {r["instance_id"]: r for r in rows_with_sources(args.repos)}
    per_repo: dict[str, int] = defaultdict(int)
    kept = []
    for iid in ids:                      # the first --published-per-repo of each repository, by id
        row = source_rows.get(iid)
        if row is not None and row["repo"] not in COMPILED and per_repo[row["repo"]] < args.published_per_repo:
            per_repo[row["repo"]] += 1
            kept.append(iid)
    ids = kept
    sample_file = out / "published-instances.jsonl"
    sample_file.write_text("".join(json.dumps(source_rows[i]) + "\n" for i in ids))
    preds = out / "published-predictions.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows if r["instance_id"] in ids))
    seconds, report = harness_eval(sample_file, args.repos, out / "published", args.workers,
                                   "--predictions", str(preds))
    agree = disagree = skipped = 0
    print(f"\npublished predictions: {len(ids)} graded in {seconds:.0f} s")
    for iid in ids:
        entry = report["instances"].get(iid, {})
        if entry.get("status") in ("error", "unsupported", None):
            skipped += 1
            print(f"  {iid}: not graded here ({entry.get('status')}: {str(entry.get('error'))[:160]})")
            continue
        ours, theirs = entry["status"] == "resolved", iid in resolved_published
        if ours == theirs:
            agree += 1
        else:
            disagree += 1
            print(f"  {iid}: ours {'resolved' if ours else entry['status']}, published "
                  f"{'resolved' if theirs else 'unresolved'}: {failure_cause(out / 'published', iid, entry)}")
    print(f"verdicts: {agree} agree, {disagree} disagree, {skipped} not graded here")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=Path, required=True)
    parser.add_argument("--per-repo", type=int, default=5)
    parser.add_argument("--compiled", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repo", action="append", default=[], help="only these repositories")
    parser.add_argument("--out", type=Path, default=Path("runs") / f"bench-swebench-{int(time.time())}")
    parser.add_argument("--predictions", help="a published system's predictions (JSONL)")
    parser.add_argument("--verdicts", help="its published verdicts: JSON with a 'resolved' id list")
    parser.add_argument("--published-per-repo", type=int, default=3, help="published predictions graded per repository")
    parser.add_argument("--published-only", action="store_true", help="only grade the published predictions")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.published_only:
        published(args, args.out)
        return
    chosen = sample(rows_with_sources(args.repos), args.per_repo, args.compiled, args.repo, args.repos)
    instances = args.out / "sample.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in chosen))
    print(f"sample: {len(chosen)} instances of {len({r['repo'] for r in chosen})} repositories -> {instances}")
    gold_seconds, gold = harness_eval(instances, args.repos, args.out / "gold", args.workers, "--model", "gold")
    _, empty = harness_eval(instances, args.repos, args.out / "empty", args.workers, "--model", "empty")
    print_table(chosen, gold, empty)
    def status(iid: str) -> str:
        return str(gold["instances"].get(iid, {}).get("status", "missing"))

    pure = [r["instance_id"] for r in chosen if r["repo"] in PURE]
    # attempted: what the harness can run offline; an unsupported instance (requests < 2.9 calls httpbin.org)
    # is listed apart with its reason, never counted as resolved or unresolved
    attempted = [i for i in pure if status(i) != "unsupported"]
    ok = [i for i in attempted if status(i) == "resolved"]
    print(f"\ngold resolved {len(ok)}/{len(attempted)} pure-Python instances attempted "
          f"({100 * len(ok) / max(1, len(attempted)):.1f}%, target >= 95%; {len(pure) - len(attempted)} more "
          f"unsupported offline); empty resolved {empty['resolved_instances']}/{len(chosen)} (target 0)")
    for row in chosen:
        entry = gold["instances"].get(row["instance_id"], {"status": "missing"})
        if entry.get("status") not in ("resolved", "unsupported"):
            print(f"  gold failure {row['instance_id']}: {failure_cause(args.out / 'gold', row['instance_id'], entry)}")
    for row in chosen:
        entry = gold["instances"].get(row["instance_id"], {"status": "missing"})
        if entry.get("status") == "unsupported":
            print(f"  unsupported {row['instance_id']}: {failure_cause(args.out / 'gold', row['instance_id'], entry)}")
    print_costs(gold, gold_seconds, args.workers, chosen)
    if args.predictions and args.verdicts:
        published(args, args.out)


if __name__ == "__main__":
    main()
