"""Real SWE-bench rows, unmodified, through `harness eval`: gold must resolve, empty must not.

(Over 400 lines: the sample run and the gold table share the readers of rows, sources and reports.)

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

With `--table ROWS...` it runs the gold table instead: gold and empty predictions over every row of the
given files (e.g. /work/data/rows/lite-test-5.0.jsonl) whose source is in --repos, in chunks of --chunk
rows (ordered by repository and version, so a chunk shares environments), each chunk one `harness eval
--predictions ... --out DIR/<gold|empty>/<chunk> [--resume]`. Stop it at any time (Ctrl-C) and run the
same command again: finished instances are kept, the rest continue; --max-chunks bounds one sitting. It
then prints, in the markdown of docs/evaluation.md, the per-repository table and the per-instance table
(resolved; unresolved with the reason; unsupported with the reason; infrastructure failures; rows
without a source). --report-only prints them from what is done.

    .venv/bin/python bench/bench_swebench.py --repos DIR [--per-repo 5] [--compiled 2] [--workers 2]
        [--repo django/django ...] [--out DIR] [--predictions FILE --verdicts FILE [--published-per-repo 3]]
    .venv/bin/python bench/bench_swebench.py --repos DIR --table ROWS... --out DIR [--chunk 20]
        [--max-chunks N] [--workers 2] [--test-timeout 1800] [--dataset NAME --split NAME] [--report-only]
"""

from __future__ import annotations

import argparse
import json
import re
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


TABLE_MODELS = ("gold", "empty")
ROW_DEFECT = re.compile(r"/n/fs/|/tmp/tmp")      # a required test id holding the dataset makers' own path


def table_chunks(args: argparse.Namespace) -> list[Path]:
    """The chunk files of the table in args.out (made once from args.table; the same rows on every run)."""
    folder = args.out / "chunks"
    if folder.is_dir():
        return sorted(folder.glob("[0-9][0-9][0-9].jsonl"))
    rows: dict[str, dict[str, Any]] = {}
    for name in args.table:
        for line in Path(name).read_text().splitlines():
            if line.strip():
                rows.setdefault(json.loads(line)["instance_id"], json.loads(line))
    ordered = sorted(rows.values(), key=lambda r: (r["repo"], r["version"], r["instance_id"]))
    sourced = [r for r in ordered if has_source(r, args.repos) and complete(r, args.repos)]
    missing = {r["instance_id"]: r["repo"] for r in ordered if r not in sourced}
    folder.mkdir(parents=True)
    (args.out / "no-source.json").write_text(json.dumps(missing, indent=1))
    for number, start in enumerate(range(0, len(sourced), args.chunk)):
        part = sourced[start:start + args.chunk]
        (folder / f"{number:03}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
        (folder / f"{number:03}.empty.jsonl").write_text("".join(json.dumps(
            {"instance_id": r["instance_id"], "model_name_or_path": "empty", "model_patch": ""}) + "\n" for r in part))
    print(f"table: {len(sourced)} rows with a source in {len(list(folder.glob('???.jsonl')))} chunks, "
          f"{len(missing)} without one ({args.out / 'no-source.json'})")
    return sorted(folder.glob("[0-9][0-9][0-9].jsonl"))


def chunk_done(out: Path) -> bool:
    report = out / "report.json"
    return report.is_file() and not json.loads(report.read_text()).get("incomplete_ids")


def run_table(args: argparse.Namespace, chunks: list[Path]) -> None:
    """Run every chunk not finished yet, gold then empty, resuming a chunk an earlier sitting started."""
    ran = 0
    for chunk in chunks:
        for model in TABLE_MODELS:
            out = args.out / model / chunk.stem
            if chunk_done(out):
                continue
            if args.max_chunks is not None and ran >= args.max_chunks:
                print(f"--max-chunks {args.max_chunks} reached; run the same command again to continue")
                return
            predictions = "gold" if model == "gold" else str(chunk.with_suffix(".empty.jsonl"))
            cmd = [sys.executable, "-m", "harness.cli.main", "eval", "--instances", str(chunk), "--repos",
                   str(args.repos), "--predictions", predictions, "--out", str(out), "--workers", str(args.workers),
                   "--json", "--label", "harness.bench=1", *(["--resume"] if (out / "run.json").is_file() else []),
                   *(["--dataset", args.dataset] if args.dataset else []),
                   *(["--split", args.split] if args.split else []), "--test-timeout", str(args.test_timeout)]
            started = time.monotonic()
            proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            ran += 1
            print(f"{model} chunk {chunk.stem}: exit {proc.returncode} in {time.monotonic() - started:.0f} s")
            if proc.returncode == 130 or proc.returncode < 0:     # Ctrl-C, SIGTERM, or killed
                raise SystemExit(f"stopped (exit {proc.returncode}); run the same command again to continue")
            if proc.returncode not in (0, 3):
                raise SystemExit(f"harness eval failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def table_reason(out: Path, iid: str, entry: dict[str, Any]) -> str:
    """Why an instance is not resolved, in one line for a markdown table cell."""
    status = entry.get("status")
    if status in ("unsupported", "error"):
        text = str(entry.get("error") or status).splitlines()[0]
        return text if len(text) <= 240 else text[:240] + " ..."
    if status == "patch_failed":
        return "the patch does not apply (patch_apply.txt)"
    verdict = json.loads((out / "instances" / iid / "report.json").read_text())[iid]
    failed = [t for kind in ("FAIL_TO_PASS", "PASS_TO_PASS") for t in (verdict.get("tests_status") or {}).get(
        kind, {}).get("failure", [])]
    parts = [f"tests rejected: {verdict['tests_rejected']['reason']}"] if verdict.get("tests_rejected") else []
    timed_out = entry.get("failure_reason") == "tests_timed_out"
    parts += ["the tests timed out (--test-timeout)"] if timed_out else []
    if any(ROW_DEFECT.search(t) for t in failed):
        parts.append("row defect: a required test id holds the dataset makers' temporary path")
    if failed and not timed_out:
        parts.append(f"{len(failed)} required test(s) failed: {', '.join(failed[:3])}{' ...' * (len(failed) > 3)}")
    return "; ".join(parts) or "unresolved"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")


def empty_verdict(out: Path, iid: str, entry: dict[str, Any]) -> str:
    """The tests' verdict on an empty patch: report.json's `tests_resolved`, or, in a report written before
    it carried that key, the instance's own report.json (its `runs` are there when the tests ran)."""
    resolved = entry.get("tests_resolved")
    if resolved is None:
        report = out / "instances" / iid / "report.json"
        verdict = json.loads(report.read_text()).get(iid, {}) if report.is_file() else {}
        resolved = verdict.get("resolved") if verdict.get("runs") else None
    return "not graded" if resolved is None else "resolved" if resolved else "not resolved"


def table_results(args: argparse.Namespace, chunks: list[Path]) -> dict[str, dict[str, tuple[str, str]]]:
    """{model: {instance: (status, reason)}} over every chunk run so far."""
    results: dict[str, dict[str, tuple[str, str]]] = {m: {} for m in TABLE_MODELS}
    for model in TABLE_MODELS:
        for chunk in chunks:
            out = args.out / model / chunk.stem
            report = json.loads((out / "report.json").read_text()) if (out / "report.json").is_file() else {}
            for iid, entry in report.get("instances", {}).items():
                status = str(entry.get("status"))
                if status == "empty_patch":       # the empty prediction: did the tests resolve it anyway?
                    results[model][iid] = (empty_verdict(out, iid, entry), "")
                else:
                    results[model][iid] = (status, "" if status == "resolved" else table_reason(out, iid, entry))
    return results


def print_gold_table(args: argparse.Namespace, chunks: list[Path]) -> None:
    rows = [json.loads(line) for c in chunks for line in c.read_text().splitlines() if line.strip()]
    missing = json.loads((args.out / "no-source.json").read_text())
    results = table_results(args, chunks)
    gold, empty = results["gold"], results["empty"]
    repos = sorted({r["repo"] for r in rows} | set(missing.values()))
    print("\n| repository | rows | gold resolved | unresolved | unsupported | infrastructure | no source | not run "
          "| empty resolved |\n|---|---|---|---|---|---|---|---|---|")
    for repo in repos:
        ids = [r["instance_id"] for r in rows if r["repo"] == repo]
        count = {s: sum(1 for i in ids if gold.get(i, ("not run",))[0] == s)
                 for s in ("resolved", "unresolved", "patch_failed", "unsupported", "error", "not run")}
        nosource = sum(1 for r in missing.values() if r == repo)
        print(f"| {repo} | {len(ids) + nosource} | {count['resolved']} | {count['unresolved'] + count['patch_failed']} "
              f"| {count['unsupported']} | {count['error']} | {nosource} | {count['not run']} "
              f"| {sum(1 for i in ids if empty.get(i, ('',))[0] == 'resolved')} |")
    print("\n| instance | gold | why not resolved | empty |\n|---|---|---|---|")
    for row in rows:
        iid = row["instance_id"]
        status, reason = gold.get(iid, ("not run", ""))
        print(f"| {iid} | {status} | {cell(reason)} | {empty.get(iid, ('not run', ''))[0]} |")
    for iid in sorted(missing):
        print(f"| {iid} | no source | {cell('the source snapshot lacks part of its tree (see --repos README)')} | |")
    graded = {m: [s for s, _ in results[m].values() if s not in ("unsupported", "error", "not graded")]
              for m in TABLE_MODELS}
    print(f"\ngold resolved {graded['gold'].count('resolved')}/{len(graded['gold'])} graded "
          f"({sum(1 for s, _ in gold.values() if s == 'unsupported')} unsupported, "
          f"{sum(1 for s, _ in gold.values() if s == 'error')} infrastructure failures, {len(rows) - len(gold)} not "
          f"run yet, {len(missing)} without a source); empty resolved "
          f"{graded['empty'].count('resolved')}/{len(graded['empty'])} graded")


def table(args: argparse.Namespace) -> None:
    chunks = table_chunks(args)
    if not args.report_only:
        run_table(args, chunks)
    print_gold_table(args, chunks)


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
    parser.add_argument("--table", nargs="+", metavar="ROWS", help="run the gold table over these row files")
    parser.add_argument("--chunk", type=int, default=20, help="rows per `harness eval` run of the table")
    parser.add_argument("--max-chunks", type=int, help="chunk runs in this sitting (default: all)")
    parser.add_argument("--report-only", action="store_true", help="print the table from what is done")
    parser.add_argument("--dataset", help="recorded in each run.json, e.g. SWE-bench/SWE-bench_Lite")
    parser.add_argument("--split", help="recorded in each run.json, e.g. test")
    parser.add_argument("--test-timeout", type=float, default=1800.0, help="seconds per test run in the table")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.table:
        table(args)
        return
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
