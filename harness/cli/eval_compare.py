"""`harness eval compare A B [--json]`: is evaluation B better than A, or is the difference noise?

The work is `harness.core.comparison` (each report read by `harness.evaluation.compare`); this
prints it. Exit codes: 0 compared, B not significantly worse than A (better, or the interval holds
0); 1 B is significantly worse (the whole 95% interval of B - A is below 0: a regression a script can
stop on); 2 bad input (a folder without a readable report.json, or no instance graded in both).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import EXIT_FAILED, print_safe
from harness.core import compare_reports
from harness.core.records import EvalReport
from harness.errors import ConfigError
from harness.evaluation import read_report

USAGE = "harness eval compare A B [--json], A and B the --out folders of two `harness eval` runs"


def run(folders: list[Path], as_json: bool) -> int:
    if len(folders) != 2:
        raise ConfigError(f"harness eval compare takes two evaluation folders, got {len(folders)} "
                          f"({', '.join(map(str, folders)) or 'none'}); usage: {USAGE}")
    a, b = (read_report(f) for f in folders)
    comparison = compare_reports(a, b)
    if comparison is None:
        raise ConfigError(f"{folders[0]} and {folders[1]} graded no instance in common (A: "
                          f"{len(a.submitted_ids)} submitted, B: {len(b.submitted_ids)}); compare two evaluations "
                          "of the same instances")
    result = {"a": _side(folders[0], a), "b": _side(folders[1], b), **comparison.to_dict()}
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return EXIT_FAILED if comparison.difference.verdict == "worse" else 0


def _side(folder: Path, report: EvalReport) -> dict[str, object]:
    return {"folder": str(folder), "model": report.model_name_or_path, "epochs": report.epochs or 1,
            "pass_at_1": report.attempts.pass_at_1, "pass_at_1_ci": report.attempts.pass_at_1_ci}


def _print(c: dict[str, Any]) -> None:
    for name in ("a", "b"):
        side = c[name]
        print_safe(sys.stdout, f"{name.upper()}  {side['folder']}  ({side['model']}, {side['epochs']} epoch(s)): "
                               f"pass@1 {c[f'pass_at_1_{name}']:.3f} over the {c['paired_instances']} paired "
                               "instance(s)")
    low, high = c["ci"]
    print_safe(sys.stdout, f"B - A  {c['difference']:+.3f}  (95% CI {low:+.3f} to {high:+.3f}, {c['method']}): "
                           f"{_verdict(c['verdict'])}")
    left = list(c["left_out"].items())
    print_safe(sys.stdout, f"left out: {len(left)} instance(s)" + ("" if not left else ": " + "; ".join(
        f"{iid} ({why})" for iid, why in left[:20]) + (" ..." if len(left) > 20 else "")))
    print_safe(sys.stdout, f"changed: {len(c['changed'])} instance(s)")
    for ch in c["changed"]:
        print_safe(sys.stdout, f"  {ch['instance_id']}  {ch['a']} -> {ch['b']}  {ch['change']}")


def _verdict(verdict: str) -> str:
    return {"better": "B is better (the interval is above 0)", "worse": "B is worse (the interval is below 0)"}.get(
        verdict, "no significant difference (the interval holds 0)")
