"""The batch runner: for each task, an environment image, an agent session (or a given prediction),
then grading in a fresh sandbox; in parallel on a backend, resumable, and cleaned up on Ctrl-C.

`run_evaluation` prepares the output folder (checked against --resume), then hands the pending
attempts (one per instance, or `--epochs N` of them: `attempts.schedule`) to a backend
(`backends.local.ThreadPoolBackend` or `backends.ray.RayBackend`), which runs
`one_instance.evaluate_instance` for each: the one place that catches every exception of an attempt and
records it. Every container carries the label ``harness.eval=<run id>``; an interrupted run removes
all of them.

Ctrl-C and SIGTERM (`stop_signals`, either backend, main thread): the first drains the run (no
instance starts, the running ones finish), the second cancels the running ones; the run then ends
with `KeyboardInterrupt` after writing the outputs of what finished (`backends.local`). A resumed run
keeps every attempt whose `done` record is whole and reruns the others from scratch, so no attempt
is graded twice, whether the run was stopped, cancelled or killed.

An existing `--out` folder that holds a link is refused before anything is written into it; the
run's folders are 0700 and its files 0600, written without following links (`harness.checks`).
"""

from __future__ import annotations

import dataclasses
import json
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import checks
from harness.config import Config, Secrets
from harness.core.records import MAX_EPOCHS, EvalReport, EvalRun, RecordError, RunSettings
from harness.core.task import Task
from harness.errors import ConfigError
from harness.evaluation.attempts import Attempt, schedule
from harness.evaluation.backends import Backend, Batch
from harness.evaluation.backends.local import ThreadPoolBackend
from harness.evaluation.backends.ray import RayBackend
from harness.evaluation.instance_files import Prediction
from harness.evaluation.options import RUN_LABEL, EvalOptions, StopRequest
from harness.evaluation.progress import Events, SilentEvents
from harness.evaluation.report import InstanceRecord, read_done, write_atomic, write_report
from harness.evaluation.stages import Stages


def run_evaluation(tasks: list[Task], options: EvalOptions, config: Config, secrets: Secrets, *,
                   predictions: Mapping[str, Prediction] | None = None, events: Events | None = None) -> EvalReport:
    """Evaluate `tasks` (`options.epochs` attempts each); returns the report (also written to
    `options.out_dir`/report.json)."""
    check_epochs(options.epochs, predictions is not None)
    events = events or SilentEvents()
    out = Path(options.out_dir)
    model_name = _model_name(options, predictions)
    if predictions is not None:
        tasks = [t for t in tasks if t.id in predictions]
    ids = [t.id for t in tasks]
    attempts = schedule(tasks, options.epochs)
    records = _prepare_out(out, options, model_name, ids, attempts, config)
    run_id = uuid.uuid4().hex[:12]
    stages = Stages(config, secrets, options, {RUN_LABEL: run_id, **options.labels}, threading.Event(), events,
                    predictions)
    pending = [a for a in attempts if a.key not in records]
    events.begin(len(attempts), dict(records), len(pending), epochs=options.epochs)
    batch = Batch(stages, out, model_name, ids, records, run_id, epochs=options.epochs)
    try:
        with stop_signals(batch.stop):
            backend(options).evaluate(pending, batch)
    finally:
        stages.close()
    return write_report(out, ids, batch.records, model_name, epochs=options.epochs)   # what batch.report() writes


def check_epochs(epochs: int, predictions: bool) -> None:
    """Refuse an `--epochs` outside 1..MAX_EPOCHS, and more than one epoch of given predictions."""
    if not 1 <= epochs <= MAX_EPOCHS:
        raise ConfigError(f"--epochs {epochs} is not a number of attempts per instance; expected 1 to {MAX_EPOCHS}, "
                          "e.g. --epochs 5")
    if predictions and epochs > 1:
        raise ConfigError(f"--epochs {epochs} reruns the agent on each instance, and --predictions runs no agent: "
                          f"the same patch graded again measures the tests, not the agent (--grade-runs {epochs} "
                          "does that); drop --epochs, or give --model SPEC (e.g. --model gold --epochs 3)")


@contextmanager
def stop_signals(stop: StopRequest, *, enabled: bool = True) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM raise `stop`'s level instead of interrupting (only in the main
    thread, where Python runs handlers; a SIGINT ignored at start, as in a background job, stays
    ignored). The previous handlers are put back on the way out."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(_signum: int, _frame: object) -> None:
        stop.request()      # only a flag: the backend's loop acts on it and says so

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig, before in previous.items():
        if before is not signal.SIG_IGN:
            signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, signal.SIG_DFL if before is None else before)   # None: set outside Python


def backend(options: EvalOptions) -> Backend:
    """The backend `options.backend` names: "local" (a thread pool here) or "ray"."""
    if options.backend == "local":
        return ThreadPoolBackend(options.workers)
    if options.backend == "ray":
        return RayBackend(options.ray_address)
    raise ConfigError(f"unknown evaluation backend {options.backend!r}; expected \"local\" or \"ray\"")


def _model_name(options: EvalOptions, predictions: Mapping[str, Prediction] | None) -> str:
    if predictions is not None:
        names = sorted({p.model_name_or_path for p in predictions.values()})
        return names[0] if len(names) == 1 else ",".join(names)
    if not options.model:
        raise ConfigError("harness eval needs --model SPEC (e.g. --model gold) or --predictions FILE")
    return options.model


def _prepare_out(out: Path, options: EvalOptions, model_name: str, ids: list[str], attempts: list[Attempt],
                 config: Config) -> dict[str, InstanceRecord]:
    """Check `out` against --resume and return the records of the attempts already finished there."""
    settings = RunSettings(model=model_name, grade_runs=options.grade_runs, instances=ids, epochs=options.epochs,
                           agent=config.loop.agent or "")
    run_file = out / "run.json"
    if out.exists() or out.is_symlink():
        checks.refuse_links(out)
    if run_file.is_file():
        if not options.resume:
            raise ConfigError(f"{out} already holds an evaluation (run.json); pass --resume to continue "
                              "it, or choose another --out")
        before = _read_run(run_file)
        _check_same_run(out, before.settings, settings)
        _check_same_rows(out, before, options)
    checks.private_dir(out)
    records: dict[str, InstanceRecord] = {}
    for attempt in attempts if options.resume else []:
        record = read_done(attempt.folder(out))
        if record is not None and (record.instance_id, record.epoch) == (attempt.task.id, attempt.epoch):
            records[attempt.key] = record
    run = EvalRun(settings=settings, options=_jsonable(options), config=config.to_dict(), dataset=options.dataset,
                  split=options.split, started_at=round(time.time(), 3), attempts_done_at_start=len(records))
    write_atomic(run_file, json.dumps(run.to_dict(), indent=2) + "\n")
    return records


def _read_run(run_file: Path) -> EvalRun:
    try:
        return EvalRun.from_dict(json.loads(run_file.read_text()), str(run_file))
    except (json.JSONDecodeError, RecordError) as exc:
        raise ConfigError(f"--resume: {run_file} cannot be read ({exc}); use another --out") from exc


def _check_same_run(out: Path, before: RunSettings, now: RunSettings) -> None:
    """--resume continues the same run: the same model, agent, grading runs, epochs and instances (a
    setting the earlier run did not record is not compared; epochs then were one)."""
    if before.model != now.model:
        raise ConfigError(f"--resume: {out} was run with model {before.model!r}, not "
                          f"{now.model!r}; use the same model or another --out")
    if before.agent is not None and before.agent != now.agent:
        raise ConfigError(f"--resume: {out} was run by {_agent_words(before.agent)}, not by "
                          f"{_agent_words(now.agent)}; resume with "
                          f"{f'--agent {before.agent}' if before.agent else 'no --agent'}, or use another --out")
    if before.grade_runs is not None and before.grade_runs != now.grade_runs:
        raise ConfigError(f"--resume: {out} was run with --grade-runs {before.grade_runs}, not "
                          f"{now.grade_runs}; use the same value or another --out")
    if (before.epochs or 1) != (now.epochs or 1):
        raise ConfigError(f"--resume: {out} was run with --epochs {before.epochs or 1}, not {now.epochs or 1}; "
                          f"resume with --epochs {before.epochs or 1}, or use another --out for another number")
    old = set(before.instances if before.instances is not None else now.instances or [])
    new = set(now.instances or [])
    if old != new:
        raise ConfigError(f"--resume: {out} was run on {len(old)} instance(s) and this command names {len(new)} "
                          f"(missing: {sorted(old - new)[:10]}, new: {sorted(new - old)[:10]}); resume with the "
                          "same tasks and --instance-ids, or use another --out")


def _agent_words(agent: str | None) -> str:
    return f"the agent {agent!r}" if agent else "the harness's own loop"


def _check_same_rows(out: Path, before: EvalRun, options: EvalOptions) -> None:
    """--resume grades against the same dataset and split as the run it continues (when both say)."""
    for flag, then, now in (("--dataset", before.dataset, options.dataset), ("--split", before.split, options.split)):
        if then is not None and now is not None and then != now:
            raise ConfigError(f"--resume: {out} graded {flag} {then!r}, not {now!r}; resume with {flag} {then!r} "
                              "(and the same --instances), or use another --out")


def _jsonable(options: EvalOptions) -> dict[str, Any]:
    data = dataclasses.asdict(options)
    data["out_dir"] = str(options.out_dir)
    data["labels"] = dict(options.labels)
    return data
