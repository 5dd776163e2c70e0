"""Two evaluations' reports compared: is B better than A, or is the difference noise? Used by
`harness eval compare A B` (harness.cli.eval_compare) and the web console's compare view.

The pairs are the instances both evaluations graded, each with its pass rate there (resolved over
graded attempts, `outcomes`: so a 5-epoch run compares with a single-epoch one, or with a report of
SWE-bench's own harness); every other instance of either is left out, with why (only in A, only in B,
no graded attempt in A or in B). Over the pairs: pass@1 of each, the difference B - A with its 95%
interval (`stats.paired_difference`) and its verdict (better, worse, or no significant difference:
the interval holds 0), and the instances whose pass rate changed: `fixed` (higher in B; with single
attempts, resolved in B only) or `broken`. Pure functions of the records: nothing is read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from harness.core import stats
from harness.core.records import GRADED_STATUSES, AttemptStats, EvalReport

Change = Literal["fixed", "broken"]


@dataclass(frozen=True)
class Changed:
    """An instance whose pass rate differs: (graded, resolved) attempts in A and in B."""

    instance_id: str
    a: tuple[int, int]
    b: tuple[int, int]

    @property
    def change(self) -> Change:
        return "fixed" if self.b[1] * self.a[0] > self.a[1] * self.b[0] else "broken"


@dataclass(frozen=True)
class Comparison:
    difference: stats.Difference
    left_out: dict[str, str]          # instance -> why it is not among the pairs
    changed: list[Changed]            # fixed first, then broken, each by id

    def to_dict(self) -> dict[str, Any]:
        d = self.difference
        return {"paired_instances": d.instances, "pass_at_1_a": round(d.mean_a, 6),
                "pass_at_1_b": round(d.mean_b, 6), "difference": round(d.difference, 6),
                "ci": d.interval.as_list(), "method": d.method, "verdict": d.verdict,
                "left_out_instances": len(self.left_out), "left_out": self.left_out,
                "changed": [{"instance_id": c.instance_id, "a": rate(c.a), "b": rate(c.b), "change": c.change}
                            for c in self.changed]}


def rate(counts: tuple[int, int] | None) -> str:
    """(graded, resolved) as "resolved/graded"; "-" for none."""
    return "-" if counts is None else f"{counts[1]}/{counts[0]}"


def compare_reports(a: EvalReport, b: EvalReport) -> Comparison | None:
    """B against A over the instances both graded; None when there is no such instance."""
    in_a, in_b = outcomes(a), outcomes(b)
    asked_a, asked_b = set(submitted(a)) | set(in_a), set(submitted(b)) | set(in_b)
    paired = sorted(set(in_a) & set(in_b))
    left_out: dict[str, str] = {}
    for iid in sorted((asked_a | asked_b) - set(paired)):
        if iid not in asked_b:
            left_out[iid] = "only in A"
        elif iid not in asked_a:
            left_out[iid] = "only in B"
        else:
            left_out[iid] = " and ".join(f"no graded attempt in {side}" for side, got in (("A", in_a), ("B", in_b))
                                         if iid not in got)
    difference = stats.paired_difference([(in_a[i][1] / in_a[i][0], in_b[i][1] / in_b[i][0]) for i in paired])
    if difference is None:
        return None
    changed = [Changed(i, in_a[i], in_b[i]) for i in paired if in_a[i][1] * in_b[i][0] != in_b[i][1] * in_a[i][0]]
    changed.sort(key=lambda c: (c.change != "fixed", c.instance_id))
    return Comparison(difference, left_out, changed)


def outcomes(report: EvalReport) -> dict[str, tuple[int, int]]:
    """(graded, resolved) attempts of each instance `report` graded: from its `attempts` (every epoch),
    else from its `instances` (a report written before epochs: one attempt each), else from SWE-bench's
    id lists (a report of SWE-bench's own harness). A value of the wrong shape (a report read
    leniently, as the web console does) makes its instance not graded, never an error."""
    per_instance = report.attempts.per_instance if isinstance(report.attempts, AttemptStats) else {}
    if isinstance(per_instance, dict) and per_instance:
        return {iid: (e["graded"], e["passed"]) for iid, e in per_instance.items()
                if isinstance(iid, str) and isinstance(e, dict) and _counts(e.get("graded"), e.get("passed"))}
    if isinstance(report.instances, dict) and report.instances:
        return {iid: (1, int(e.get("status") == "resolved")) for iid, e in report.instances.items()
                if isinstance(iid, str) and isinstance(e, dict) and e.get("status") in GRADED_STATUSES}
    failed = [*_ids(report.unresolved_ids), *_ids(report.empty_patch_ids)]
    return {**{iid: (1, 0) for iid in failed}, **{iid: (1, 1) for iid in _ids(report.resolved_ids)}}


def _counts(graded: object, passed: object) -> bool:
    if not isinstance(graded, int) or not isinstance(passed, int) or isinstance(graded, bool) \
            or isinstance(passed, bool):
        return False
    return 0 <= passed <= graded and graded >= 1


def _ids(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def submitted(report: EvalReport) -> list[str]:
    """The instances `report` was asked to evaluate (its submitted ids, else the instances it lists)."""
    ids = _ids(report.submitted_ids)
    return ids or sorted(k for k in (report.instances if isinstance(report.instances, dict) else {})
                         if isinstance(k, str))
