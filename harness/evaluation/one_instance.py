"""One instance, start to finish: the one public per-instance entry point every backend calls.

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
from harness.core.task import Task
from harness.environments.errors import EnvironmentUnsupported
from harness.evaluation.options import Cancelled
from harness.evaluation.report import InstanceRecord, instance_dir, write_done
from harness.evaluation.stages import Stages


def evaluate_instance(task: Task, stages: Stages, out: Path, model_name: str,
                      cancel: threading.Event) -> InstanceRecord | None:
    """Evaluate one instance from scratch into ``out/instances/<id>/``; None when the run was
    interrupted meanwhile (then no `done` marker is written)."""
    if cancel.is_set():
        return None
    folder = instance_dir(out, task.id)
    checks.remove_tree(folder, out)
    checks.private_dir(folder.parent)
    checks.private_dir(folder)
    started = time.monotonic()
    record = InstanceRecord(instance_id=task.id, status="error", model_name_or_path=model_name)
    stages.events.started(task.id)
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
