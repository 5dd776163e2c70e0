"""What the secret scan costs the file selection of `harness run --repo` on a Django-sized checkout.

Extracts a SWE-bench Django tree (default /work/shared/swebench/repos/django__django-11099.tar.gz) into a
temporary folder, makes it a git checkout (as an operator's would be), and times `select_files` in fresh
processes (as each `harness run --repo` is one), median of --repeat runs each (interleaved):

  baseline   the selection without the content scan (names only: what it cost before the scan)
  first use  with the scan, in an empty cache folder: the scanner compiles its rules, every file is scanned
  cold       with the scan, rules compiled, no verdict kept: every file is read and scanned
  warm       with the scan, the verdicts of a previous run kept: only changed files would be scanned

and prints each with its ratio to the baseline, then how many files were left out and by which rules
(paths and line numbers; never a matched value). Usage:

  .venv/bin/python bench/bench_secret_scan.py [--tarball PATH] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

DJANGO = Path("/work/shared/swebench/repos/django__django-11099.tar.gz")

SELECT = """
import json, sys, time
from harness.core import project, secret_scan
if sys.argv[2] == "names":                 # the baseline: the selection as it was before the content scan
    secret_scan.expect = lambda key: None
    secret_scan.scan_files = lambda root, files: ({}, {})
started = time.perf_counter()
chosen = project.select_files(sys.argv[1])
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "files": len(chosen.files), "bytes": chosen.total_bytes,
                  "left_out": [[i.path, i.why, i.rule, i.line] for i in chosen.left_out]}))
"""


def checkout(tarball: Path, work: Path) -> Path:
    with tarfile.open(tarball) as tar:
        tar.extractall(work, filter="data")
    [root] = [p for p in work.iterdir() if p.is_dir()]
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
    if not (root / ".git").exists():
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "tree"]):
            subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)
    return root


def select(root: Path, mode: str, cache: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", SELECT, str(root), mode], capture_output=True, text=True,
                          env={**os.environ, "XDG_CACHE_HOME": str(cache)}, check=True)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def timed(root: Path, cache: Path, repeat: int) -> dict[str, tuple[float, dict[str, Any]]]:
    """Median seconds (and the last result) of each measurement; the runs of the three steady ones are
    interleaved so that a busy machine weighs on each alike."""
    shutil.rmtree(cache, ignore_errors=True)
    runs: dict[str, list[dict[str, Any]]] = {"first": [select(root, "scan", cache)]}
    verdicts = cache / "harness" / "secret-scan" / "verdicts.json"
    for _ in range(repeat):
        runs.setdefault("baseline", []).append(select(root, "names", cache))
        verdicts.unlink(missing_ok=True)
        runs.setdefault("cold", []).append(select(root, "scan", cache))
        runs.setdefault("warm", []).append(select(root, "scan", cache))
    return {name: (statistics.median(float(r["seconds"]) for r in found), found[-1])
            for name, found in runs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tarball", type=Path, default=DJANGO)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-secret-scan-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        root = checkout(args.tarball, work / "tree")
        time.sleep(3.5)                              # files changed in the last 3 s keep no verdict (racy)
        print(f"{root.name}: extracted and committed in {time.perf_counter() - started:.1f} s")
        cache = work / "cache"
        times = timed(root, cache, args.repeat)
        base, plain = times["baseline"]
        scanned = times["warm"][1]
        print(f"{plain['files']} files, {plain['bytes']} bytes selected without the scan; median of "
              f"{args.repeat} fresh processes each (first use: one)")
        for label, name in (("baseline (names only)", "baseline"), ("first use (rules compiled)", "first"),
                            ("cold (no verdicts kept)", "cold"), ("warm (verdicts kept)", "warm")):
            seconds = times[name][0]
            print(f"  {label:28} {seconds:6.3f} s   x{seconds / base:5.2f}")
        report(plain, scanned)
    return 0


def report(plain: dict[str, Any], scanned: dict[str, Any]) -> None:
    left = [row for row in scanned["left_out"] if row[1] == "looks like a secret"]
    before = [row for row in plain["left_out"] if row[1] == "looks like a secret"]
    print(f"left out as secrets: {len(left)} file(s) of {int(scanned['files']) + len(left)} "
          f"({len(before)} by name alone before the scan)")
    for rule, count in Counter(row[2] for row in left).most_common():
        print(f"  {rule}: {count}")
    for path, _, rule, line in left:
        print(f"    {path} ({f'line {line}: ' if line else ''}{rule})")


if __name__ == "__main__":
    sys.exit(main())
