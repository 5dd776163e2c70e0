"""One attempt at an instance, start to finish: the one public per-attempt entry point every backend
calls (an attempt: `harness.evaluation.attempts`; a single-epoch run has one per instance).

This is the one place that catches every exception: whatever goes wrong in an instance (an image that
will not build, Docker failing, a model API down) is recorded as that instance's infrastructure error
with the stage and message, and the other instances go on.
"""

from __future__ import annotations

import threading
import time
import traceback
from pathlib import Path

from harness import checks
from harness.environments.errors import EnvironmentUnsupported
from harness.evaluation.attempts import Attempt
from harness.evaluation.options import Cancelled
from harness.evaluation.report import InstanceRecord, write_done
from harness.evaluation.stages import Stages


def evaluate_instance(attempt: Attempt, stages: Stages, out: Path, model_name: str,
                      cancel: threading.Event) -> InstanceRecord | None:
    """Evaluate one attempt from scratch into its folder (``out/instances/<id>/``, or
    ``.../<id>/epoch-<k>/``); None when the run was interrupted meanwhile (then no `done` marker is
    written)."""
    if cancel.is_set():
        return None
    task, folder = attempt.task, attempt.folder(out)
    checks.remove_tree(folder, out)
    for level in (out / "instances", folder.parent, folder):
        checks.private_dir(level)
    started = time.monotonic()
    record = InstanceRecord(instance_id=task.id, status="error", model_name_or_path=model_name, epoch=attempt.epoch)
    stages.events.started(attempt.key)
    stage = "environment"
    try:
        image = stages.environment(task, record)
        stage = "prediction" if stages.predictions is not None else "agent session"
        patch = stages.patch(task, folder, image, record)
        stage = "grading"
        stages.grade(task, patch, image, folder, record)
    except Cancelled:
        return None
    except EnvironmentUnsupported as exc:       # cannot be built offline: listed apart, never unresolved
        record.status = "unsupported"
        record.error = f"{stage}: {exc.reason}"
        checks.write_file(folder / "error.txt", f"{record.error}\n")
    except Exception as exc:  # noqa: BLE001 - the batch runner records whatever failed, per instance
        if cancel.is_set():
            return None
        record.status = "error"
        record.error = f"{stage}: {type(exc).__name__}: {exc}"
        checks.write_file(folder / "error.txt", f"{record.error}\n\n{traceback.format_exc()}")
    record.duration = time.monotonic() - started
    if cancel.is_set():
        return None
    write_done(folder, record)
    return record
