"""What a batch evaluation is asked to do, and the signal that stops an instance midway."""

from __future__ import annotations

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


class Cancelled(Exception):
    """The run was interrupted; the instance is left unfinished (no `done` marker)."""
