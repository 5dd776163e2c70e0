"""The batch runner: for each task, an environment image, an agent session (or a given prediction),
then grading in a fresh sandbox; in parallel, resumable, and cleaned up on Ctrl-C.

Each worker thread handles one instance at a time and spends its time waiting on Docker or a model
API, so threads are enough. This is the one place that catches every exception: whatever goes wrong
in an instance (an image that will not build, Docker failing, a model API down) is recorded as that
instance's infrastructure error with the stage and message, and the other instances go on. Every
container carries the label ``harness.eval=<run id>``; an interrupted run removes all of them.

An existing `--out` folder that holds a link is refused before anything is written into it; the
run's folders are 0700 and its files 0600, written without following links (`harness.checks`).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from harness import checks
from harness.config import Config, Secrets
from harness.errors import ConfigError
from harness.evaluation.instances import Prediction
from harness.evaluation.progress import Events, SilentEvents
from harness.evaluation.report import (InstanceRecord, instance_dir, read_done, write_atomic, write_done,
                                       write_outputs)
from harness.evaluation.stages import Stages
from harness.core.task import Task

RUN_LABEL = "harness.eval"


@dataclass(frozen=True)
class EvalOptions:
    out_dir: Path
    model: str | None = None               # model spec; None when grading predictions
    workers: int = 1
    resume: bool = False
    grade_runs: int = 1
    test_timeout: float = 900.0
    labels: Mapping[str, str] = field(default_factory=dict)   # added to every container
    backend: str = "local"                 # local: a thread pool here; ray: Ray tasks (harness.evaluation.ray_eval)
    ray_address: str | None = None         # the Ray cluster to join; None: a one-machine Ray for this run
    allow_direct_references: bool = False  # requirements given as URLs (wheel files only) may be fetched


class Cancelled(Exception):
    """The run was interrupted; the instance is left unfinished (no `done` marker)."""


def run_evaluation(tasks: list[Task], options: EvalOptions, config: Config, secrets: Secrets, *,
                   predictions: Mapping[str, Prediction] | None = None, events: Events | None = None) -> dict[str, Any]:
    """Evaluate `tasks`; returns the report (also written to `options.out_dir`/report.json)."""
    events = events or SilentEvents()
    out = Path(options.out_dir)
    model_name = _model_name(options, predictions)
    if predictions is not None:
        tasks = [t for t in tasks if t.id in predictions]
    ids = [t.id for t in tasks]
    records = _prepare_out(out, options, model_name, ids, config)
    run_id = uuid.uuid4().hex[:12]
    cancel = threading.Event()
    stages = Stages(config, secrets, options, {RUN_LABEL: run_id, **options.labels}, cancel, events, predictions)
    pending = [t for t in tasks if t.id not in records]
    events.begin(len(ids), {i: r for i, r in records.items()}, len(pending))
    if options.backend == "ray":
        from harness.evaluation.ray_eval import evaluate_batch
        return evaluate_batch(pending, ids, records, stages, out, model_name, events)
    pool = ThreadPoolExecutor(max_workers=max(1, options.workers), thread_name_prefix="eval")
    try:
        futures = {pool.submit(_instance, t, stages, out, model_name, cancel): t.id for t in pending}
        for future in as_completed(futures):
            record = future.result()
            if record is not None:
                records[record.instance_id] = record
                write_outputs(out, ids, records, model_name)
                events.finished(record)
    except BaseException:
        cancel.set()
        pool.shutdown(wait=False, cancel_futures=True)
        removed = remove_containers(run_id)
        _wait_for_workers(pool, timeout=30.0)
        removed += remove_containers(run_id)
        write_outputs(out, ids, records, model_name)
        events.message(f"stopped: removed {removed} container(s); finished instances are kept in {out}, "
                       "rerun with --resume to continue")
        raise
    pool.shutdown(wait=True)
    return write_outputs(out, ids, records, model_name)


def _wait_for_workers(pool: ThreadPoolExecutor, timeout: float) -> None:
    """Give the workers a moment to notice their containers are gone and unwind."""
    deadline = time.monotonic() + timeout
    for thread in list(getattr(pool, "_threads", ())):
        thread.join(max(0.0, deadline - time.monotonic()))


def _instance(task: Task, stages: "Stages", out: Path, model_name: str,
              cancel: threading.Event) -> InstanceRecord | None:
    """Evaluate one instance from scratch; None when the run was interrupted meanwhile."""
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


def _model_name(options: EvalOptions, predictions: Mapping[str, Prediction] | None) -> str:
    if predictions is not None:
        names = sorted({p.model_name_or_path for p in predictions.values()})
        return names[0] if len(names) == 1 else ",".join(names)
    if not options.model:
        raise ConfigError("harness eval needs --model SPEC (e.g. --model gold) or --predictions FILE")
    return options.model


def _prepare_out(out: Path, options: EvalOptions, model_name: str, ids: list[str],
                 config: Config) -> dict[str, InstanceRecord]:
    """Check `out` against --resume and return the records already finished there."""
    settings = {"model": model_name, "grade_runs": options.grade_runs, "instances": ids}
    run_file = out / "run.json"
    if out.exists() or out.is_symlink():
        checks.refuse_links(out)
    if run_file.is_file():
        if not options.resume:
            raise ConfigError(f"{out} already holds an evaluation (run.json); pass --resume to continue "
                              "it, or choose another --out")
        before = json.loads(run_file.read_text()).get("settings", {})
        if before.get("model") != model_name:
            raise ConfigError(f"--resume: {out} was run with model {before.get('model')!r}, not "
                              f"{model_name!r}; use the same model or another --out")
    checks.private_dir(out)
    write_atomic(run_file, json.dumps({"settings": settings, "options": _jsonable(options),
                                       "config": config.to_dict()}, indent=2) + "\n")
    records: dict[str, InstanceRecord] = {}
    for iid in ids:
        record = read_done(instance_dir(out, iid)) if options.resume else None
        if record is not None:
            records[iid] = record
    return records


def _jsonable(options: EvalOptions) -> dict[str, Any]:
    data = dataclasses.asdict(options)
    data["out_dir"] = str(options.out_dir)
    data["labels"] = dict(options.labels)
    return data


def remove_containers(run_id: str) -> int:
    """Remove every container of the run `run_id` (running or not); returns how many.

    The low-level listing is used because `containers.list()` inspects each container afterwards
    and fails when one is removed in between, which is exactly what happens while a run unwinds.
    """
    import docker
    client = docker.from_env()
    found = client.api.containers(all=True, filters={"label": f"{RUN_LABEL}={run_id}"})
    for entry in found:
        try:
            client.api.remove_container(entry["Id"], force=True, v=True)
        except docker.errors.NotFound:
            pass
    return len(found)
