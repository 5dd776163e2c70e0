"""What the web console reads: run folders (`harness run`), evaluation folders (`harness eval`) and the
trajectories inside them, as JSON-ready views.

Everything read here was written by a model or by an input file at some point, so every string of
every view passes through `safe_tree` (the project's one escaping rule, `escape_unsafe`) before it
leaves; the page then sets it as text, never as markup. Files are opened and records parsed by the
one bounded reader (harness.web.records): a planted link or fifo, a gigabyte of test output or a
record nested 200,000 deep cannot make the console read what it should not, stall or fail; a record
that cannot be read makes its folder's row `damaged`, with why, and the other folders are listed.

The folders are found by `harness.web.folders`; the records they hold are read as the record
types of `harness.core.records` (leniently, `strict=False`: a value of the wrong type is shown as
text, as every value is), so a key is spelled once, where the writer spells it too.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, TypeVar, get_args

from harness.core.comparison import compare_reports
from harness.core.records import AttemptStats, DoneRecord, EvalReport, EvalRun, InstanceStatus, Record, SessionResult
from harness.web.folders import LIVE_SECONDS, MAX_DEPTH, MAX_ENTRIES, Roots, folder_kind, folder_names, mtime
from harness.web.progress import count, eval_progress
from harness.web.records import (
    TEXT_CAP,
    Damaged,
    NotFound,
    open_regular,
    parse_json,
    read_capped,
    read_record,
)
from sandbox.text import escape_unsafe

FOLD_LINES = (60, 30)         # a longer text block is sent as its first and last lines, with the count between
FOLD_CHARS = 60_000           # and one longer than this, whatever its lines, as its head and tail characters
STEP_PAGE = 200
TEST_OUTPUTS = ("tests.txt", "test_output.txt")
INSTANCE_STATUSES: tuple[str, ...] = get_args(InstanceStatus)
STATUSES = (*INSTANCE_STATUSES, "incomplete")
STATES = ("finished", "running", "stopped", "incomplete", "damaged")
CHANGES = ("broken", "fixed", "changed", "same")
R = TypeVar("R", bound=Record)

__all__ = [
    "CHANGES", "FOLD_CHARS", "FOLD_LINES", "LIVE_SECONDS", "MAX_DEPTH", "MAX_ENTRIES", "STATES", "STATUSES",
    "STEP_PAGE", "Roots", "compare_view", "css_class", "eval_summary", "eval_view", "fold", "folder_kind",
    "list_runs", "mtime", "read_text", "run_folder", "run_summary", "run_view", "safe_dict", "safe_tree",
]


def css_class(value: object, known: tuple[str, ...]) -> str:
    """`value` when it is one of `known` (a fixed table), else "other": a value read from a run folder
    names no CSS class of its own."""
    return value if isinstance(value, str) and value in known else "other"


def safe_tree(value: Any) -> Any:
    """`value` (parsed JSON) with every string, keys included, through `escape_unsafe`."""
    if isinstance(value, str):
        return escape_unsafe(value)
    if isinstance(value, dict):
        return {escape_unsafe(str(k)): safe_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe_tree(v) for v in value]
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def safe_dict(value: dict[str, Any]) -> dict[str, Any]:
    return _dict(safe_tree(value))


def read_text(path: Path, cap: int = TEXT_CAP) -> dict[str, Any] | None:
    """A text file as a view: its escaped text (the first `cap` bytes), size and whether it was cut; or
    why it was not read (a link, a fifo) as `refused`."""
    try:
        got = read_capped(path, cap)
    except NotFound as exc:
        return {"text": "", "bytes": 0, "cut": False, "refused": escape_unsafe(str(exc))}
    if got is None:
        return None
    data, size = got
    return {"text": escape_unsafe(data.decode("utf-8", errors="backslashreplace").replace("\r\n", "\n")),
            "bytes": size, "cut": size > len(data)}


def fold(text: str) -> dict[str, Any]:
    """A text block as the page shows it: whole when short; else its head and tail with what is between
    counted (the page fetches the whole block on demand)."""
    lines = text.split("\n")
    head, tail = FOLD_LINES
    out: dict[str, Any] = {"chars": len(text), "lines": len(lines)}
    if len(lines) > head + tail:
        out.update(head="\n".join(lines[:head]), tail="\n".join(lines[-tail:]), omitted_lines=len(lines) - head - tail)
        text = out["head"] + out["tail"]
    else:
        out["text"] = text
    if len(text) > FOLD_CHARS:
        whole = text if "text" in out else "\n".join(lines)
        out.pop("text", None)
        out.update(head=whole[: FOLD_CHARS // 2], tail=whole[-FOLD_CHARS // 4:],
                   omitted_chars=len(whole) - FOLD_CHARS // 2 - FOLD_CHARS // 4)
        out.pop("omitted_lines", None)
    return out


def _last_meta(path: Path) -> dict[str, Any]:
    """The meta of the last whole line of a trajectory (read from its last 256 KB only)."""
    try:
        opened = open_regular(path)
    except NotFound:
        return {}
    if opened is None:
        return {}
    with opened as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - 262_144))
        got = f.read(262_144)
    for line in reversed(got.split(b"\n")):
        try:
            data = parse_json(line, "trajectory.jsonl")
        except Damaged:
            continue
        meta = data.get("meta") if isinstance(data, dict) else None
        return meta if isinstance(meta, dict) else {}
    return {}


def _record(folder: Path, name: str, problems: list[str]) -> dict[str, Any] | None:
    """The JSON object `name` of `folder` through the bounded reader; None when it is missing, or
    damaged (then why is added to `problems`)."""
    try:
        value = read_record(folder / name)
    except Damaged as exc:
        problems.append(str(exc))
        return None
    if value is not None and not isinstance(value, dict):
        problems.append(f"{name}: a JSON {type(value).__name__}, expected an object")
        return None
    return value


def _damaged(row: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    if problems:
        row.update(state="damaged", damaged="; ".join(problems))
    row["state_class"] = css_class(row.get("state"), STATES)
    row["status_class"] = css_class(row.get("status"), STATUSES)
    row["tests_class"] = css_class(str(row.get("tests_passed")).lower(), ("true", "false"))
    return safe_dict(row)


def _read(kind: type[R], folder: Path, name: str, problems: list[str]) -> R | None:
    """The record `name` of `folder` as `kind`, read leniently (a value of the wrong type is kept, to be
    shown as text); None when it is missing or damaged (then why is added to `problems`)."""
    data = _record(folder, name, problems)
    return None if data is None else kind.from_dict(data, name, strict=False)


def run_summary(ref: str, folder: Path) -> dict[str, Any]:
    """One line of the runs list (a `harness run` folder or an evaluation's instance)."""
    problems: list[str] = []
    result = _read(SessionResult, folder, "result.json", problems)
    record = _read(DoneRecord, folder, "done", problems)   # an evaluation's instance: its graded record
    trajectory = folder / "trajectory.jsonl"
    changed = mtime(trajectory) or mtime(folder) or 0.0
    row: dict[str, Any] = {"ref": ref, "kind": "run", "name": folder.name, "changed": changed}
    if result is not None:
        usage = _dict(result.usage)
        row.update(task=result.task, model=result.model, agent=result.agent, stop_reason=result.stop_reason,
                   tests_passed=result.tests_passed, turns=result.turns,
                   tokens={"input": usage.get("input_tokens"), "output": usage.get("output_tokens"),
                           "cache_read": usage.get("cache_read_tokens")},
                   cost_usd=result.cost_usd, seconds=_dict(result.durations).get("total"),
                   finished_at=result.finished_at, state="finished")
    elif record is not None:
        row.update(task=record.instance_id, model=record.model_name_or_path, stop_reason=record.stop_reason,
                   turns=record.turns, seconds=record.duration, cost_usd=record.cost_usd, state="finished")
    else:
        meta = _last_meta(trajectory)
        row.update(task=folder.name.rsplit("-", 2)[0], turns=meta.get("turn"),
                   state="running" if time.time() - changed < LIVE_SECONDS else "stopped")
    if record is not None:
        row.update(status=record.status, tests_passed=record.tests_resolved)
    return _damaged(row, problems)


def eval_summary(ref: str, folder: Path) -> dict[str, Any]:
    """One line of the runs list for an evaluation: its totals, and its progress while unfinished
    (`harness.web.progress`: done / total attempts, resolved so far, ETA)."""
    problems: list[str] = []
    report = _read(EvalReport, folder, "report.json", problems)
    run = _read(EvalRun, folder, "run.json", problems)
    progress = eval_progress(folder, report, run, time.time())
    row: dict[str, Any] = {"ref": ref, "kind": "eval", "name": folder.name, "progress": progress,
                           "epochs": progress["epochs"], "state": progress["state"],
                           "changed": mtime(folder / "report.json") or mtime(folder) or 0.0}
    if run is not None:
        row["model"] = run.settings.model
    if report is not None:
        totals = _dict(report.totals)
        tokens = _dict(totals.get("tokens"))
        total = "?" if report.total_instances is None else report.total_instances
        epochs = f" x {progress['epochs']} epochs" if progress["epochs"] > 1 else ""
        row.update(model=row.get("model") or report.model_name_or_path, agent=report.agent,
                   task=f"{escape_unsafe(str(total))[:40]} instances{epochs}",
                   resolved=report.resolved_instances, total=report.total_instances,
                   pass_at_1=_attempts(report).pass_at_1,
                   turns=totals.get("turns"), cost_usd=totals.get("cost_usd"), seconds=totals.get("duration"),
                   tokens={"input": tokens.get("input_tokens"), "output": tokens.get("output_tokens")})
    else:
        row.update(task=f"{progress['done']} of {progress['total'] or '?'} attempts done",
                   resolved=0, total=len(run.settings.instances or []) if run is not None else None)
    return _damaged(row, problems)


def _attempts(report: EvalReport) -> AttemptStats:
    """The report's `attempts`, or an empty one when it is not an object (a report read leniently)."""
    return report.attempts if isinstance(report.attempts, AttemptStats) else AttemptStats()


def list_runs(roots: Roots, cut: list[str] | None = None) -> list[dict[str, Any]]:
    """Every run and evaluation below the roots, newest first; one that cannot be read is listed as
    damaged, with why, and the others as ever. What of the folders was not looked at goes in `cut`."""
    rows = [_summary(ref, folder, kind) for ref, folder, kind in roots.walk(cut)]
    return sorted(rows, key=lambda r: -float(r.get("changed") or 0))


def _summary(ref: str, folder: Path, kind: str) -> dict[str, Any]:
    try:
        return run_summary(ref, folder) if kind == "run" else eval_summary(ref, folder)
    except Exception as exc:  # noqa: BLE001 - one folder's failure is that folder's damage, shown; the list stands
        why = f"{folder.name} could not be read ({type(exc).__name__}: {str(exc)[:300]})"
        return _damaged({"ref": ref, "kind": kind, "name": folder.name, "changed": mtime(folder) or 0.0}, [why])


# ---------------------------------------------------------------- one run


def run_folder(roots: Roots, ref: str) -> Path:
    """The run folder `ref` names; NotFound when it climbs out, crosses a link or is not a run."""
    folder = roots.resolve(ref)
    if folder_kind(folder) != "run":
        raise NotFound(f"{ref!r} is not a run folder (it holds no trajectory.jsonl or result.json)")
    return folder


def run_view(roots: Roots, ref: str) -> dict[str, Any]:
    """Everything about one run but its steps: result.json, the patch, the test output, attempts. A
    damaged result.json or record is None here; the summary says why (`damaged`)."""
    folder = run_folder(roots, ref)
    problems: list[str] = []
    cut: list[str] = []
    names = folder_names(folder, cut, roots.max_entries)
    tests = next((read_text(folder / n) for n in TEST_OUTPUTS if n in names), None)
    eval_folder = next((f.parent for f in (folder.parent, folder.parent.parent) if f.name == "instances"), None)
    instance = eval_folder is not None and folder_kind(eval_folder) == "eval"     # an instance, or one of its epochs
    return {"summary": run_summary(ref, folder), "result": safe_tree(_record(folder, "result.json", problems)),
            "patch": read_text(folder / "patch.diff"), "tests": tests,
            "patch_apply": read_text(folder / "patch_apply.txt"), "error": read_text(folder / "error.txt"),
            "agent_log": read_text(folder / "agent.log"), "calls": "calls.jsonl" in names,
            "record": safe_tree(_record(folder, "done", problems)),
            "attempts": sorted(escape_unsafe(f"{ref}/{n}") for n in names if n.startswith("attempt-")
                               and folder_kind(folder / n) == "run"),
            "evaluation": escape_unsafe(ref.rsplit("/instances/", 1)[0]) if instance else None,
            "files": sorted(escape_unsafe(n) for n in names), "cut": [escape_unsafe(c) for c in cut]}


# ---------------------------------------------------------------- evaluations


def eval_view(roots: Roots, ref: str) -> dict[str, Any]:
    """An evaluation's report: totals, the per-instance table (with links to each instance's run, and to
    each epoch's), pass counts and the statistics of the attempts, the per-repository table, the
    instance times and the progress. A damaged report.json gives no rows; the summary says why
    (`damaged`); a missing one (no attempt finished yet) gives the progress alone."""
    folder, report, problems = _evaluation(roots, ref)
    present = folder_names(folder / "instances", problems, roots.max_entries)
    attempts = _attempts(report)
    per_instance = _dict(attempts.per_instance)
    epochs = count(report.epochs) or 1
    rows = []
    for iid, entry in sorted(_dict(report.instances).items()):
        if not isinstance(entry, dict):
            continue
        r = DoneRecord.from_dict(entry, f"report.json: instances: {iid}", strict=False)
        rows.append({"instance_id": iid, "status": r.status, "repo": r.repo or "(none)",
                     "duration": r.duration, "turns": r.turns, "cost_usd": r.cost_usd,
                     "stop_reason": r.stop_reason, "error": r.error, "flaky": r.flaky,
                     **_epochs(ref, iid, epochs, per_instance.get(iid), iid in present)})
    incomplete = report.incomplete_ids
    for iid in incomplete if isinstance(incomplete, list) else []:
        if isinstance(iid, str):
            rows.append({"instance_id": iid, "status": "incomplete", "repo": "(none)",
                         **_epochs(ref, iid, epochs, per_instance.get(iid), iid in present)})
    for row in rows:
        row["status_class"] = css_class(row["status"], STATUSES)
    totals = {k: v for k, v in report.to_dict().items() if k.endswith("_instances") and v is not None}
    statistics = {k: v for k, v in attempts.to_dict().items() if k not in ("per_instance", "unknown")}
    return safe_dict({"summary": eval_summary(ref, folder), "totals": totals, "epochs": epochs,
                      "statistics": statistics, "model": report.model_name_or_path, "agent": report.agent,
                      "instances": rows, "repositories": _repositories(rows),
                      "settings": _record(folder, "run.json", problems)})


def _evaluation(roots: Roots, ref: str) -> tuple[Path, EvalReport, list[str]]:
    folder = roots.resolve(ref)
    if folder_kind(folder) != "eval":
        raise NotFound(f"{ref!r} is not an evaluation folder (it holds no run.json with report.json)")
    problems: list[str] = []
    return folder, _read(EvalReport, folder, "report.json", problems) or EvalReport(), problems


def _epochs(ref: str, iid: str, epochs: int, entry: object, present: bool) -> dict[str, Any]:
    """An instance row's links and pass count: its folder (epoch 1's with several epochs), and each
    epoch's status and folder."""
    base = f"{ref}/instances/{iid}" if present else None
    statuses = _dict(entry).get("statuses")
    statuses = statuses if isinstance(statuses, list) else []
    passed, graded = count(_dict(entry).get("passed")), count(_dict(entry).get("graded"))
    row: dict[str, Any] = {"run": base if epochs == 1 or base is None else f"{base}/epoch-1",
                           "passes": f"{passed}/{graded}" if passed is not None and graded is not None else None}
    if epochs > 1:
        row["epochs"] = [{"epoch": k, "status": status, "status_class": css_class(status, STATUSES),
                          "run": f"{base}/epoch-{k}" if base and status is not None else None}
                         for k, status in enumerate(statuses[:epochs], 1)]
    return row


def _repositories(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = table.setdefault(str(row["repo"]), {})
        counts[str(row["status"])] = counts.get(str(row["status"]), 0) + 1
    return dict(sorted(table.items()))


def compare_view(roots: Roots, a: str, b: str) -> dict[str, Any]:
    """Two evaluations side by side: each instance's status and pass count in both, the ones that
    changed first, and the difference of pass@1 with its 95% interval (`harness.core.comparison`)."""
    (_, report_a, _), (_, report_b, _) = _evaluation(roots, a), _evaluation(roots, b)
    left, right = eval_view(roots, a), eval_view(roots, b)
    comparison = compare_reports(report_a, report_b)
    statistics = comparison.to_dict() if comparison is not None else None
    by_a = {r["instance_id"]: r for r in left["instances"]}
    by_b = {r["instance_id"]: r for r in right["instances"]}
    rows = []
    for iid in sorted(set(by_a) | set(by_b)):
        ra, rb = by_a.get(iid) or {}, by_b.get(iid) or {}
        change = _change(ra, rb)
        rows.append({"instance_id": iid, "a": ra.get("status"), "b": rb.get("status"), "change": change,
                     "passes_a": ra.get("passes"), "passes_b": rb.get("passes"),
                     "a_class": css_class(ra.get("status"), STATUSES), "b_class": css_class(rb.get("status"), STATUSES),
                     "run_a": ra.get("run"), "run_b": rb.get("run")})
    order = {"broken": 0, "fixed": 1, "changed": 2, "same": 3}
    rows.sort(key=lambda r: (order[r["change"]], r["instance_id"]))
    counts = {k: sum(1 for r in rows if r["change"] == k) for k in order}
    return {"a": left["summary"], "b": right["summary"], "rows": rows, "counts": counts,
            "statistics": safe_tree(statistics)}


def _change(a: dict[str, Any], b: dict[str, Any]) -> str:
    """fixed / broken: the pass rate rose / fell (a single attempt's: resolved in B / in A only); same:
    the same rate and status (epoch 1's); changed: anything else. An instance not graded counts 0."""
    rate_a, rate_b = _rate(a), _rate(b)
    if rate_a != rate_b:
        return "fixed" if rate_b > rate_a else "broken"
    return "same" if a.get("status") == b.get("status") else "changed"


def _rate(row: dict[str, Any]) -> float:
    passed, _, graded = str(row.get("passes") or "").partition("/")
    if passed.isdigit() and graded.isdigit() and int(graded) > 0:
        return int(passed) / int(graded)
    return 1.0 if row.get("status") == "resolved" else 0.0
