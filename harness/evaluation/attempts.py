"""Attempts: each instance run N times (`harness eval --epochs N`), every attempt a whole agent session
and its grading in fresh sandboxes, and what report.json says of them (`AttemptStats`).

Layout: with one epoch an attempt's folder is ``instances/<id>/``, as ever; with N > 1 it is
``instances/<id>/epoch-<k>/``, k = 1..N, each holding what a single-epoch instance folder holds, its
`done` record (with its `epoch`) included. The attempt's key, its folder below ``instances/``, names
it in the batch's records, the progress lines and the messages. Attempts are scheduled epoch by epoch
(every instance's first attempt, then every second...), so a stopped run has whole epochs first.

An attempt is *graded* when it ended resolved, unresolved, patch_failed or empty_patch. An
infrastructure error, an environment that cannot be built offline and an unfinished attempt are no
outcome of the agent's: they count for nothing, and an instance without a graded attempt is left out
of the statistics (`left_out` says why). The statistics themselves are `harness.core.stats`, the
comparison of two reports `harness.core.comparison`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core import stats
from harness.core.records import GRADED_STATUSES, AttemptStats
from harness.core.task import Task

EPOCH_FOLDER = "epoch-"


@dataclass(frozen=True)
class Attempt:
    """One attempt at `task`: `epoch` 1..N in a run of N > 1 epochs; None in a run of one."""

    task: Task
    epoch: int | None = None

    @property
    def key(self) -> str:
        return attempt_key(self.task.id, self.epoch)

    def folder(self, out: Path) -> Path:
        return attempt_dir(out, self.task.id, self.epoch)


def attempt_key(instance_id: str, epoch: int | None) -> str:
    """The attempt's folder below ``instances/``: ``<id>`` (one epoch) or ``<id>/epoch-<k>``."""
    return instance_id if epoch is None else f"{instance_id}/{EPOCH_FOLDER}{epoch}"


def attempt_dir(out: Path, instance_id: str, epoch: int | None) -> Path:
    return out / "instances" / attempt_key(instance_id, epoch)


def epoch_numbers(epochs: int) -> list[int | None]:
    """The `epoch` of each attempt of an instance: [None] for one epoch, else 1..N."""
    return [None] if epochs == 1 else list(range(1, epochs + 1))


def schedule(tasks: Sequence[Task], epochs: int) -> list[Attempt]:
    """Every attempt of the run, epoch by epoch."""
    return [Attempt(task, epoch) for epoch in epoch_numbers(epochs) for task in tasks]


def summarize(ids: Sequence[str], epochs: int, statuses: Mapping[str, Sequence[str | None]],
              totals: dict[str, Any]) -> AttemptStats:
    """report.json's `attempts` for `ids`: `statuses[id]` holds each epoch's status in order (None: not
    finished); `totals` are every attempt's (duration, tokens, cost, turns)."""
    per_instance: dict[str, dict[str, Any]] = {}
    counts: dict[str, tuple[int, int]] = {}
    left_out: dict[str, str] = {}
    for iid in ids:
        row = list(statuses.get(iid, [None] * epochs))
        graded = [s for s in row if s in GRADED_STATUSES]
        passed = sum(s == "resolved" for s in graded)
        per_instance[iid] = {"statuses": row, "passed": passed, "graded": len(graded)}
        if graded:
            counts[iid] = (len(graded), passed)
        else:
            left_out[iid] = _why_left_out(row)
    at_1 = stats.pass_at_1(list(counts.values()))
    fewest = min((n for n, _ in counts.values()), default=0)
    at_k = {str(k): stats.mean_pass_at_k(list(counts.values()), k) for k in range(1, fewest + 1)}
    done = [s for iid in ids for s in per_instance[iid]["statuses"] if s is not None]
    return AttemptStats(
        epochs=epochs, attempts_total=len(ids) * epochs, attempts_done=len(done),
        attempts_resolved=sum(s == "resolved" for s in done), per_instance=per_instance,
        instances_counted=len(counts), left_out=left_out,
        pass_at_1=None if at_1 is None else round(at_1.value, 6),
        pass_at_1_ci=None if at_1 is None else at_1.interval.as_list(),
        ci_method=None if at_1 is None else at_1.method,
        effective_n=None if at_1 is None else round(at_1.effective_n, 3),
        pass_at_k={k: round(v, 6) for k, v in at_k.items() if v is not None},
        flipped_ids=sorted(i for i, (n, c) in counts.items() if 0 < c < n), totals=totals)


def _why_left_out(row: Sequence[str | None]) -> str:
    said = Counter("not finished" if s is None else s for s in row)
    return "no graded attempt: " + ", ".join(f"{n} {what}" for what, n in sorted(said.items()))
