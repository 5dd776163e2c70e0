"""Where a batch's attempts run: the `Backend` protocol and the batch state a backend reports into.

Two implementations: `local.ThreadPoolBackend` (a thread pool on this machine) and `ray.RayBackend`
(one Ray task per attempt). Each runs `harness.evaluation.one_instance.evaluate_instance` for every pending
attempt (`harness.evaluation.attempts`: one per instance, or one per instance and epoch) and hands each
record to `Batch.finish` as it completes; on an interrupt it cleans up its containers, leaves the
finished attempts written and re-raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.evaluation.attempts import Attempt
from harness.evaluation.options import StopRequest
from harness.evaluation.report import InstanceRecord, write_outputs
from harness.evaluation.stages import Stages


@dataclass
class Batch:
    """A run as its backend sees it: the stages every attempt goes through, and the outputs so far
    (`records` keyed by attempt key)."""

    stages: Stages
    out: Path
    model_name: str
    ids: list[str]
    records: dict[str, InstanceRecord]
    run_id: str
    stop: StopRequest = field(default_factory=StopRequest)   # Ctrl-C / SIGTERM: drain, then cancel
    epochs: int = 1

    def finish(self, record: InstanceRecord) -> None:
        """Record a finished attempt and rewrite the predictions and report.json."""
        self.records[record.key] = record
        self.report()
        self.stages.events.finished(record)

    def report(self) -> dict[str, Any]:
        """Write the outputs as they stand and return the report."""
        return write_outputs(self.out, self.ids, self.records, self.model_name, epochs=self.epochs)


class Backend(Protocol):
    def evaluate(self, pending: list[Attempt], batch: Batch) -> None:
        """Evaluate each of `pending` and `batch.finish` its record.

        Raises:
            KeyboardInterrupt (or any exception of the backend itself): after removing the run's
                containers and writing the outputs of the finished instances.
        """
        ...


__all__ = ["Backend", "Batch"]
