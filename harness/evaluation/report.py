"""What an evaluation writes: one record per instance, predictions.jsonl and report.json.

Layout of `--out DIR`::

    run.json                  the settings of the run (model, options, config), checked on --resume
    predictions.jsonl         SWE-bench predictions: {"instance_id", "model_name_or_path", "model_patch"}
    predictions.epoch-<k>.jsonl   with --epochs N > 1: epoch k's predictions (predictions.jsonl is epoch 1's)
    report.json               totals and id lists in SWE-bench's shape, plus per-instance figures, and
                              `attempts`: every epoch and its statistics (harness.evaluation.attempts)
    instances/<id>/           trajectory.jsonl, patch.diff, result.json (the agent session),
                              test_output.txt, patch_apply.txt, report.json (SWE-bench's per-instance
                              shape), error.txt (infrastructure errors) and `done`, written last;
                              with --epochs N > 1 the same in instances/<id>/epoch-<k>/, one per attempt

Each JSON file is one record type of `harness.core.records` with its schema version: run.json
`EvalRun`, report.json `EvalReport`, an instance's report.json `InstanceReport`, result.json
`SessionResult`, `done` a `DoneRecord` (`InstanceRecord.done()`; `InstanceRecord` is the record
while its stages fill it in).

`done` holds the attempt's record; an attempt folder without it is half-finished and is rerun from
scratch. The predictions files and report.json are rebuilt from the `done` records, so an interrupted
and resumed run never loses or duplicates a line. The batch's records are keyed by the attempt's key
(`attempts.attempt_key`: the instance id in a single-epoch run).

Folders are 0700 and files 0600; no file is written through a link (`harness.checks`), and a file
replaced atomically is first written to a temporary name created exclusively (`write_atomic`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, get_args

from harness.agent.loop import StopReason
from harness.core.records import DoneRecord, EvalReport, RecordError
from harness.core.records import InstanceStatus as InstanceStatus  # re-exported: the evaluation's statuses
from harness.errors import UnsafePathError
from harness.evaluation.attempts import attempt_dir, attempt_key, epoch_numbers, summarize
from sandbox.text import safe_json

DONE = "done"


@dataclass
class InstanceRecord:
    """One instance's record while it runs: each stage fills in its part; `done()` is the frozen record
    the `done` marker holds (`DoneRecord`), `from_done` the way back on --resume."""

    instance_id: str
    status: InstanceStatus
    model_name_or_path: str
    model_patch: str | None = None
    error: str | None = None          # infrastructure error: what failed, and its message
    duration: float = 0.0             # wall seconds for the whole instance
    durations: dict[str, float] = field(default_factory=dict)   # environment, session, grading, tests
    turns: int | None = None
    tokens: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    stop_reason: StopReason | None = None
    flaky: bool = False
    tests_resolved: bool | None = None   # the verdict of the tests, also for empty patches
    infra_retries: int = 0            # executions lost to the infrastructure and rerun (Ray backend)
    repo: str | None = None           # owner/name, for the per-repository table
    python_requested: str | None = None   # the interpreter the instance's specification asks for
    python_used: str | None = None        # the offline interpreter that ran it
    failure_reason: str | None = None     # unresolved maybe not by the patch: a rejected log, a timeout
    stand_in: bool | None = None          # python_used is another version than python_requested
    shims: list[str] = field(default_factory=list)   # the stand-in's shims that were active
    epoch: int | None = None              # 1..N in a run of N > 1 epochs; None: the instance's only attempt
    agent: str | None = None              # a third-party agent inside the sandbox (None: the harness's own loop)

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"

    @property
    def key(self) -> str:
        """The attempt's key: the instance id, or ``<id>/epoch-<k>``."""
        return attempt_key(self.instance_id, self.epoch)

    def done(self) -> DoneRecord:
        return DoneRecord(
            instance_id=self.instance_id, status=self.status, model_name_or_path=self.model_name_or_path,
            model_patch=self.model_patch, error=self.error, duration=self.duration, durations=dict(self.durations),
            turns=self.turns, tokens=dict(self.tokens), cost_usd=self.cost_usd, stop_reason=self.stop_reason,
            flaky=self.flaky, tests_resolved=self.tests_resolved, infra_retries=self.infra_retries, repo=self.repo,
            python_requested=self.python_requested, python_used=self.python_used,
            failure_reason=self.failure_reason, stand_in=self.stand_in, shims=list(self.shims), epoch=self.epoch,
            agent=self.agent)

    @classmethod
    def from_done(cls, d: DoneRecord) -> InstanceRecord | None:
        """The record `d` holds; None when it names no instance or status (not a whole record)."""
        if d.instance_id is None or d.status is None:
            return None
        return cls(instance_id=d.instance_id, status=d.status, model_name_or_path=d.model_name_or_path or "",
                   model_patch=d.model_patch, error=d.error, duration=d.duration or 0.0, durations=dict(d.durations),
                   turns=d.turns, tokens=dict(d.tokens), cost_usd=d.cost_usd,
                   stop_reason=_stop_reason(d.stop_reason), flaky=bool(d.flaky), tests_resolved=d.tests_resolved,
                   infra_retries=d.infra_retries, repo=d.repo, python_requested=d.python_requested,
                   python_used=d.python_used, failure_reason=d.failure_reason, stand_in=d.stand_in,
                   shims=list(d.shims), epoch=d.epoch, agent=d.agent)

    def to_dict(self) -> dict[str, Any]:
        return self.done().to_dict()


def _stop_reason(value: str | None) -> StopReason | None:
    """A recorded stop reason as the loop's Literal (one the loop no longer knows is dropped)."""
    return cast(StopReason, value) if value is None or value in get_args(StopReason) else None


def instance_dir(out: Path, instance_id: str) -> Path:
    """The folder of a single-epoch run's instance (`attempts.attempt_dir` for any attempt)."""
    return attempt_dir(out, instance_id, None)


def write_done(folder: Path, record: InstanceRecord) -> None:
    """Write the record atomically; its presence marks the instance as finished."""
    write_atomic(folder / DONE, safe_json(record.to_dict(), indent=2) + "\n")


def read_done(folder: Path) -> InstanceRecord | None:
    """The instance's record, or None when it is not finished: no marker, or one torn or of the wrong
    shape (the instance is rerun from scratch)."""
    marker = folder / DONE
    if not marker.is_file():
        return None
    try:
        return InstanceRecord.from_done(DoneRecord.from_dict(json.loads(marker.read_text()), str(marker)))
    except (json.JSONDecodeError, RecordError):
        return None


def write_outputs(out: Path, ids: list[str], records: dict[str, InstanceRecord], model: str, *,
                  epochs: int = 1) -> dict[str, Any]:
    """Rebuild the predictions and report.json from the finished records; returns report.json's object."""
    return write_report(out, ids, records, model, epochs=epochs).to_dict()


def write_report(out: Path, ids: list[str], records: dict[str, InstanceRecord], model: str, *,
                 epochs: int = 1) -> EvalReport:
    """Rebuild predictions.jsonl (epoch 1), predictions.epoch-<k>.jsonl (with epochs > 1) and report.json
    from the finished records (keyed by attempt key); returns the report."""
    for epoch in epoch_numbers(epochs):
        done = [records[k] for k in (attempt_key(i, epoch) for i in ids) if k in records]
        lines = "".join(safe_json({"instance_id": r.instance_id, "model_name_or_path": r.model_name_or_path,
                                   "model_patch": r.model_patch}) + "\n" for r in done if r.status != "error")
        if epoch in (None, 1):
            write_atomic(out / "predictions.jsonl", lines)
        if epoch is not None:
            write_atomic(out / f"predictions.epoch-{epoch}.jsonl", lines)
    report = build_report(ids, records, model, epochs=epochs)
    write_atomic(out / "report.json", safe_json(report.to_dict(), indent=2) + "\n")
    return report


def build_report(ids: list[str], records: dict[str, InstanceRecord], model: str, *, epochs: int = 1) -> EvalReport:
    """The report of `records` (keyed by attempt key): SWE-bench's keys of epoch 1, `attempts` of all."""
    numbers = epoch_numbers(epochs)
    first = {i: records[k] for i in ids if (k := attempt_key(i, numbers[0])) in records}
    statuses = {i: [r.status if (r := records.get(attempt_key(i, e))) else None for e in numbers] for i in ids}
    every = [r for i in ids for e in numbers if (r := records.get(attempt_key(i, e))) is not None]
    return dataclasses.replace(_epoch_report(ids, first, model), epochs=epochs,
                               attempts=summarize(ids, epochs, statuses, _totals(every)))


def _epoch_report(ids: list[str], records: dict[str, InstanceRecord], model: str) -> EvalReport:
    def with_status(*statuses: InstanceStatus) -> list[str]:
        return sorted(i for i in ids if i in records and records[i].status in statuses)

    completed = with_status("resolved", "unresolved", "patch_failed")
    done = [records[i] for i in ids if i in records]
    # SWE-bench 5.0's failure tiers, additive (the ids stay in error_ids / unresolved_ids): an infrastructure
    # error is the environment tier, an unresolved instance with a `failure_reason` the ambiguous tier
    reasons = {r.instance_id: "infrastructure_error" for r in done if r.status == "error"}
    reasons |= {r.instance_id: r.failure_reason for r in done if r.status == "unresolved" and r.failure_reason}
    infra = sorted(r.instance_id for r in done if r.status == "error")
    ambiguous = sorted(i for i in reasons if i not in infra)
    stand_ins = sorted(r.instance_id for r in done if r.stand_in)
    agents = sorted({r.agent for r in done if r.agent})
    return EvalReport(
        model_name_or_path=model, agent=",".join(agents) or None,
        total_instances=len(ids), submitted_instances=len(ids),
        completed_instances=len(completed), resolved_instances=len(with_status("resolved")),
        unresolved_instances=len(with_status("unresolved", "patch_failed")),
        empty_patch_instances=len(with_status("empty_patch")),
        patch_failed_instances=len(with_status("patch_failed")),
        error_instances=len(with_status("error")),
        incomplete_instances=len([i for i in ids if i not in records]),
        flaky_instances=len([r for r in done if r.flaky]),
        submitted_ids=sorted(ids), completed_ids=completed, resolved_ids=with_status("resolved"),
        unresolved_ids=with_status("unresolved", "patch_failed"), empty_patch_ids=with_status("empty_patch"),
        patch_failed_ids=with_status("patch_failed"), error_ids=with_status("error"),
        incomplete_ids=sorted(i for i in ids if i not in records),
        flaky_ids=sorted(r.instance_id for r in done if r.flaky),
        unsupported_instances=len(with_status("unsupported")), unsupported_ids=with_status("unsupported"),
        totals=_totals(done), repositories=repository_table(done),
        instances={r.instance_id: _summary(r) for r in done},
        infra_failure_instances=len(infra), ambiguous_failure_instances=len(ambiguous),
        infra_failure_ids=infra, ambiguous_failure_ids=ambiguous, failure_reasons=dict(sorted(reasons.items())),
        stand_in_instances=len(stand_ins), stand_in_ids=stand_ins)


def _summary(r: InstanceRecord) -> dict[str, Any]:
    return {"status": r.status, "duration": round(r.duration, 3), "durations": r.durations, "turns": r.turns,
            "tokens": r.tokens, "cost_usd": r.cost_usd, "stop_reason": r.stop_reason, "flaky": r.flaky,
            "tests_resolved": r.tests_resolved, "error": r.error, "infra_retries": r.infra_retries, "repo": r.repo,
            "python_requested": r.python_requested, "python_used": r.python_used,
            "failure_reason": r.failure_reason, "stand_in": r.stand_in, "shims": r.shims, "agent": r.agent}


def repository_table(done: list[InstanceRecord]) -> dict[str, dict[str, Any]]:
    """Per repository: instances, resolved, unresolved (patch failures included), unsupported, errors,
    empty patches and wall time; instances without a repository are under "(none)"."""
    table: dict[str, dict[str, Any]] = {}
    for r in done:
        row = table.setdefault(r.repo or "(none)", {"instances": 0, "resolved": 0, "unresolved": 0,
                                                   "unsupported": 0, "errors": 0, "empty_patch": 0,
                                                   "time": 0.0})
        row["instances"] += 1
        key = {"resolved": "resolved", "unresolved": "unresolved", "patch_failed": "unresolved",
               "unsupported": "unsupported", "error": "errors", "empty_patch": "empty_patch"}[r.status]
        row[key] += 1
        row["time"] = round(row["time"] + r.duration, 3)
    return dict(sorted(table.items()))


def _totals(done: list[InstanceRecord]) -> dict[str, Any]:
    tokens: dict[str, int] = {}
    for r in done:
        for k, v in r.tokens.items():
            tokens[k] = tokens.get(k, 0) + int(v)
    costs = [r.cost_usd for r in done if r.cost_usd is not None]
    return {"duration": round(sum(r.duration for r in done), 3), "tokens": tokens,
            "cost_usd": round(sum(costs), 6) if costs else None,
            "cost_unknown": sum(1 for r in done if r.cost_usd is None and r.turns is not None),   # sessions unpriced
            "turns": sum(r.turns or 0 for r in done)}


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` at once (0600). The temporary `.<name>.tmp` beside it is created
    exclusively and without following links (a leftover one is removed first, not followed), and the
    rename replaces whatever entry `path` is, a link included, without writing through it."""
    tmp = path.with_name(f".{path.name}.tmp")
    if os.path.lexists(tmp):
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            raise UnsafePathError(f"refusing to write {path}: {tmp} is a folder; remove it")
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())      # on disk before the rename makes it the record, a crash included
    os.replace(tmp, path)
