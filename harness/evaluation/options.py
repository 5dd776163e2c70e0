"""What a batch evaluation is asked to do, how far it was asked to stop, and the signal that stops an
instance midway."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

RUN_LABEL = "harness.eval"
"""Every container of a run carries ``harness.eval=<run id>``; an interrupted run removes all of them."""


@dataclass(frozen=True)
class EvalOptions:
    out_dir: Path
    model: str | None = None               # model spec; None when grading predictions
    workers: int = 1
    resume: bool = False
    grade_runs: int = 1
    test_timeout: float = 900.0
    labels: Mapping[str, str] = field(default_factory=dict)   # added to every container
    backend: str = "local"                 # local: a thread pool here; ray: Ray tasks (harness.evaluation.backends.ray)
    ray_address: str | None = None         # the Ray cluster to join; None: a one-machine Ray for this run
    allow_direct_references: bool = False  # requirements given as URLs (wheel files only) may be fetched
    pool: int = 0                          # sandboxes started ahead per shape (sandbox.pool.SandboxPool); 0: none
    dataset: str | None = None             # what the rows are (run.json, as SWE-bench 5.0 records it)
    split: str | None = None               # the dataset's split, e.g. "test"; None: not known
    epochs: int = 1                        # attempts per instance, each a fresh session and grading (attempts.py)


class Cancelled(Exception):
    """The run was interrupted; the instance is left unfinished (no `done` marker)."""


class Cancelling(KeyboardInterrupt):
    """The second stop request: the running instances are cancelled, and the run ends as interrupted."""


class StopRequest:
    """How far the operator asked a run to stop, raised by each Ctrl-C or SIGTERM (`request`).

    Level 0 runs on; 1 **drains**: no instance starts any more and the running ones finish and are
    recorded; 2 **cancels** the running ones too (their containers are removed, nothing of them is
    recorded, `--resume` reruns them). `request` only sets a level, so it is safe in a signal handler.
    """

    DRAIN, CANCEL = 1, 2

    def __init__(self) -> None:
        self.level = 0
        self.changed = threading.Event()

    def request(self) -> int:
        """One more stop request; returns the new level (at most CANCEL)."""
        self.level = min(self.CANCEL, self.level + 1)
        self.changed.set()
        return self.level

    @property
    def draining(self) -> bool:
        return self.level >= self.DRAIN
