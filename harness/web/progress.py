"""An evaluation's progress, read from its own files: run.json (its instances and epochs, when this
command started it or resumed it, and how many attempts were finished then) and report.json (rewritten
after every finished attempt): attempts done of the total, resolved so far, and an ETA at the rate of
this command's own finished attempts.

Its state: `finished` when every attempt is done; `running` while it is not and something of it
changed in the last `LIVE_SECONDS` (run.json, report.json, or an unfinished attempt's folder or
trajectory, at most `MAX_PROBES` of them looked at, among the first `MAX_ENTRIES` instances and
`MAX_EPOCHS` epochs); else `incomplete` (stopped; `--resume` continues it). Every value comes from a
file a model or an input controls: a count that is not a non-negative integer counts as unknown, an
instance id that is not a plain name is not looked up.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Any

from harness.core.records import MAX_EPOCHS, AttemptStats, EvalReport, EvalRun
from harness.web.folders import LIVE_SECONDS, MAX_ENTRIES, mtime

MAX_PROBES = 400              # unfinished attempts whose folders are looked at for signs of life


def count(value: object) -> int | None:
    """`value` when it is a non-negative integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def eval_progress(folder: Path, report: EvalReport | None, run: EvalRun | None, now: float) -> dict[str, Any]:
    """done / total attempts, resolved so far, epochs, state and ETA (seconds; None when unknown or not
    running) of the evaluation in `folder`."""
    stats = report.attempts if report is not None and isinstance(report.attempts, AttemptStats) else AttemptStats()
    instances = run.settings.instances if run is not None and isinstance(run.settings.instances, list) else None
    epochs = count(run.settings.epochs if run is not None else None) or count(stats.epochs) or 1
    total = len(instances) * epochs if instances is not None else count(stats.attempts_total)
    done, resolved = count(stats.attempts_done), count(stats.attempts_resolved)
    if report is not None and done is None:           # a report written before epochs: one attempt each
        asked, missing = count(report.total_instances), count(report.incomplete_instances)
        done = asked - missing if asked is not None and missing is not None and missing <= asked else None
        resolved = count(report.resolved_instances)
        total = asked if total is None else total
    done, resolved = (done, resolved) if report is not None else (0, 0)
    finished = total is not None and done is not None and done >= total
    live = not finished and _changed_since(folder, instances or [], epochs, stats, now - LIVE_SECONDS)
    state = "finished" if finished else "running" if live else "incomplete"
    return {"done": done, "total": total, "resolved": resolved, "epochs": epochs, "state": state,
            "eta_seconds": _eta(run, done, total, now) if live else None}


def _eta(run: EvalRun | None, done: int | None, total: int | None, now: float) -> float | None:
    """The remaining attempts at this command's rate so far; None before its first finished attempt."""
    if run is None or done is None or total is None:
        return None
    started, before = _number(run.started_at), count(run.attempts_done_at_start)
    if started is None or before is None or done <= before or now <= started:
        return None
    return round((total - done) * (now - started) / (done - before), 1)


def _changed_since(folder: Path, instances: list[Any], epochs: int, stats: AttemptStats, since: float) -> bool:
    """Whether run.json, report.json or an unfinished attempt's folder or trajectory changed after `since`."""
    stamps = [mtime(folder / "run.json"), mtime(folder / "report.json")]
    per_instance = stats.per_instance if isinstance(stats.per_instance, dict) else {}
    unfinished = (
        folder / "instances" / iid / (f"epoch-{k}" if epochs > 1 else "")
        for iid in islice(instances, MAX_ENTRIES) if isinstance(iid, str) and _plain(iid)
        for statuses in [_statuses(per_instance.get(iid))]
        for k in range(1, min(epochs, MAX_EPOCHS) + 1) if len(statuses) < k or statuses[k - 1] is None)
    for attempt in islice(unfinished, MAX_PROBES):
        stamps += [mtime(attempt), mtime(attempt / "trajectory.jsonl")]
    return any(s is not None and s > since for s in stamps)


def _statuses(entry: object) -> list[Any]:
    statuses = entry.get("statuses") if isinstance(entry, dict) else None
    return statuses if isinstance(statuses, list) else []


def _plain(name: str) -> bool:
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name
