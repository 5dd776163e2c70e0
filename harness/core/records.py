"""The records a run and an evaluation write, one frozen type per file, shared by writer and reader.

    file                              record            schema_version   written by
    <run>/result.json                 SessionResult     1                the session (harness.outputs)
    <eval>/run.json                   EvalRun           1                evaluation.runner
    <eval>/instances/<id>/done        DoneRecord        1                evaluation.report
    <eval>/instances/<id>/report.json InstanceReport    1                evaluation.grading (SWE-bench's shape)
    <eval>/report.json                EvalReport        2                evaluation.report (SWE-bench's shape)

An evaluation of N epochs (`harness eval --epochs N`) holds one `done` per attempt, in
``instances/<id>/epoch-<k>/``; report.json's SWE-bench keys describe epoch 1 and its `attempts`
(`AttemptStats`) every epoch.

Each is read with `from_dict(data, source)` and written with `to_dict()` (the rule in `_record`:
missing keys take defaults, unknown keys are kept, a wrong type raises `RecordError`). A value a
reader shows and an older or torn file may lack defaults to None, so "not recorded" stays visible. SWE-bench's
keys are spelled as SWE-bench spells them; ``schema_version`` is one more key, which its tools ignore.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Self

from harness.core._record import SCHEMA_KEY, Record, RecordError

InstanceStatus = Literal["resolved", "unresolved", "patch_failed", "empty_patch", "error", "unsupported"]
"""How one instance ended: graded (the first three), no patch to grade, the infrastructure failed, or
its environment cannot be built offline (the reason in `error`; never counted as unresolved)."""
GRADED_STATUSES: tuple[InstanceStatus, ...] = ("resolved", "unresolved", "patch_failed", "empty_patch")
"""An attempt ended in one of these is the agent's outcome and counts in the statistics of attempts."""
MAX_EPOCHS = 100
"""The most attempts per instance `harness eval --epochs` takes."""


@dataclass(frozen=True)
class SessionResult(Record):
    """result.json: what one agent session did, measured, with the resolved config (never secrets)."""

    SCHEMA_VERSION = 1
    task: str | None = None
    model: str | None = None
    agent: str | None = None          # a third-party agent inside the sandbox (None: the harness's own loop)
    stop_reason: str | None = None
    finished: bool | None = None
    final_text: str | None = None
    turns: int | None = None
    usage: dict[str, int] = field(default_factory=dict)        # input_tokens, output_tokens, ...
    cost_usd: float | None = None
    tests_passed: bool | None = None
    tests_where: str | None = None
    test_cmd: str | None = None
    patch_files: int | None = None
    durations: dict[str, float] = field(default_factory=dict)  # "total"
    session: str | None = None
    image: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    resumed_from: str | None = None
    finished_at: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    unknown: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSettings(Record):
    """What `--resume` checks against: the model, the agent, the grading runs, the epochs and the instances
    (None: not recorded)."""

    SCHEMA_VERSION = 1
    model: str | None = None
    grade_runs: int | None = None
    instances: list[str] | None = None
    epochs: int | None = None         # attempts per instance; None: written before epochs (one)
    agent: str | None = None          # --agent as given, "" for the harness's own loop; None: not recorded
    unknown: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return _nested(super().to_dict())


def _nested(data: dict[str, Any]) -> dict[str, Any]:
    data.pop(SCHEMA_KEY)              # a record inside another: the file's version says it
    return data


@dataclass(frozen=True)
class EvalRun(Record):
    """run.json: an evaluation's settings (checked on --resume), its options and its config; `dataset` and
    `split`, SWE-bench 5.0's run.json keys, say what the rows were (None: not known, never guessed)."""

    SCHEMA_VERSION = 1
    settings: RunSettings = field(default_factory=RunSettings)
    options: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    dataset: str | None = None        # e.g. "SWE-bench/SWE-bench_Lite", or the --instances file as given
    split: str | None = None          # e.g. "test"
    started_at: float | None = None           # when this command started the run (or resumed it), Unix time
    attempts_done_at_start: int | None = None  # attempts already finished then (a resumed run's), for the ETA
    unknown: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DoneRecord(Record):
    """An instance's `done` marker: how it ended and what it cost; written last, so its presence means finished."""

    SCHEMA_VERSION = 1
    instance_id: str | None = None    # None, or no status: not a whole record (the instance is rerun)
    status: InstanceStatus | None = None
    model_name_or_path: str | None = None
    model_patch: str | None = None
    error: str | None = None          # infrastructure error: what failed, and its message
    duration: float | None = None     # wall seconds for the whole instance
    durations: dict[str, float] = field(default_factory=dict)   # environment, session, grading, tests
    turns: int | None = None
    tokens: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    stop_reason: str | None = None
    flaky: bool | None = None
    tests_resolved: bool | None = None   # the verdict of the tests, also for empty patches
    infra_retries: int = 0            # executions lost to the infrastructure and rerun (Ray backend)
    repo: str | None = None           # owner/name, for the per-repository table
    python_requested: str | None = None   # the interpreter the instance's specification asks for
    python_used: str | None = None        # the offline interpreter that ran it
    failure_reason: str | None = None     # unresolved maybe not by the patch: a rejected log, a timeout
    stand_in: bool | None = None          # python_used is another version than python_requested
    shims: list[str] = field(default_factory=list)   # the stand-in's shims that were active
    epoch: int | None = None          # which attempt, 1..N, in a run of N > 1 epochs; None: the only one
    agent: str | None = None              # a third-party agent inside the sandbox (None: the harness's own loop)
    unknown: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InstanceReport(Record):
    """An instance's report.json, SWE-bench's shape ``{instance_id: {...}}`` plus our grading details
    (present only when tests ran: None is then left out); ``schema_version`` is inside the entry."""

    SCHEMA_VERSION = 1
    instance_id: str = ""
    patch_is_None: bool = False
    patch_exists: bool = False
    patch_successfully_applied: bool = False
    resolved: bool = False
    patch_applied_with: str | None = None
    tests_status: dict[str, Any] | None = None
    tests_rejected: dict[str, Any] | None = None
    runs: list[dict[str, Any]] | None = None
    flaky: bool | None = None
    unknown: dict[str, Any] = field(default_factory=dict)

    _GRADED = ("tests_status", "tests_rejected", "runs", "flaky")

    def to_dict(self) -> dict[str, Any]:
        entry = super().to_dict()
        entry.pop("instance_id")
        if self.runs is None:
            for key in self._GRADED:
                entry.pop(key)
        return {self.instance_id: entry}

    @classmethod
    def from_dict(cls, data: object, source: str, *, strict: bool = True) -> Self:
        """Raises `RecordError` unless `data` is one instance's entry, ``{instance_id: {...}}``."""
        if not isinstance(data, dict) or len(data) != 1:
            raise RecordError(source, "(the whole file)", data, "an object of one key, the instance id")
        ((instance_id, entry),) = data.items()
        if not isinstance(entry, dict):
            raise RecordError(source, instance_id, entry, "a JSON object")
        return super().from_dict({**entry, "instance_id": instance_id}, source, strict=strict)


@dataclass(frozen=True)
class AttemptStats(Record):
    """report.json's `attempts`: every epoch of every instance and their statistics (the formulas:
    `harness.core.stats`, docs/evaluation.md "Attempts and statistics"). An attempt is graded
    when its status is resolved, unresolved, patch_failed or empty_patch (an infrastructure error,
    an unsupported environment or an unfinished attempt says nothing of the agent)."""

    SCHEMA_VERSION = 1
    epochs: int | None = None
    attempts_total: int | None = None         # instances x epochs
    attempts_done: int | None = None          # with a `done` record
    attempts_resolved: int | None = None
    per_instance: dict[str, dict[str, Any]] = field(default_factory=dict)   # statuses (epoch order), passed, graded
    instances_counted: int | None = None      # instances with a graded attempt: the statistics' m
    left_out: dict[str, str] = field(default_factory=dict)   # instance -> why it has no graded attempt
    pass_at_1: float | None = None
    pass_at_1_ci: list[float] | None = None   # [low, high], 95%
    ci_method: str | None = None
    effective_n: float | None = None          # the sample size the interval was computed with
    pass_at_k: dict[str, float] = field(default_factory=dict)   # "k" -> pass@k, k up to the fewest graded attempts
    flipped_ids: list[str] = field(default_factory=list)       # passed in some graded attempts, failed in others
    totals: dict[str, Any] = field(default_factory=dict)       # every attempt: duration, tokens, cost_usd, turns
    unknown: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return _nested(super().to_dict())


@dataclass(frozen=True)
class EvalReport(Record):
    """An evaluation's report.json: SWE-bench's totals and id lists, then ours (totals, per repository,
    per instance, SWE-bench 5.0's failure tiers, the attempts of every epoch and their statistics).
    With N > 1 epochs SWE-bench's keys, `instances`, `totals` and `repositories` are epoch 1's, so they
    pair with predictions.jsonl as in a single-epoch run; `attempts` holds every epoch."""

    SCHEMA_VERSION = 2
    model_name_or_path: str | None = None
    agent: str | None = None          # the third-party agent(s) that ran (None: the harness's own loop)
    total_instances: int | None = None
    submitted_instances: int | None = None
    completed_instances: int | None = None
    resolved_instances: int | None = None
    unresolved_instances: int | None = None
    empty_patch_instances: int | None = None
    patch_failed_instances: int | None = None
    error_instances: int | None = None
    incomplete_instances: int | None = None
    flaky_instances: int | None = None
    submitted_ids: list[str] = field(default_factory=list)
    completed_ids: list[str] = field(default_factory=list)
    resolved_ids: list[str] = field(default_factory=list)
    unresolved_ids: list[str] = field(default_factory=list)
    empty_patch_ids: list[str] = field(default_factory=list)
    patch_failed_ids: list[str] = field(default_factory=list)
    error_ids: list[str] = field(default_factory=list)
    incomplete_ids: list[str] = field(default_factory=list)
    flaky_ids: list[str] = field(default_factory=list)
    unsupported_instances: int | None = None
    unsupported_ids: list[str] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)          # duration, tokens, cost_usd, turns
    repositories: dict[str, dict[str, Any]] = field(default_factory=dict)
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)   # per instance: status, times, cost
    infra_failure_instances: int | None = None
    ambiguous_failure_instances: int | None = None
    infra_failure_ids: list[str] = field(default_factory=list)
    ambiguous_failure_ids: list[str] = field(default_factory=list)
    failure_reasons: dict[str, str] = field(default_factory=dict)
    stand_in_instances: int | None = None       # ran on another interpreter than their recipe asks
    stand_in_ids: list[str] = field(default_factory=list)
    epochs: int | None = None                 # attempts per instance; the keys above describe epoch 1
    attempts: AttemptStats = field(default_factory=AttemptStats)
    unknown: dict[str, Any] = field(default_factory=dict)


__all__ = ["AttemptStats", "DoneRecord", "EvalReport", "EvalRun", "GRADED_STATUSES", "InstanceReport", "InstanceStatus",
           "MAX_EPOCHS", "Record", "RecordError", "RunSettings", "SessionResult"]
