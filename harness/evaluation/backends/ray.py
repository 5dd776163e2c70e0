"""The Ray backend (`harness eval --backend ray`): each pending attempt (one per instance, or one per
instance and epoch: `harness.evaluation.attempts`) becomes one Ray task.

On its node the task evaluates the attempt exactly as the local backend does (`evaluate_instance`:
environment image from that node's Docker cache, agent session, grading) into a node-local folder,
then ships that folder back as a tar. The driver unpacks it (no links, 0700/0600) into the attempt's
folder, ``--out/instances/<id>/`` or ``.../<id>/epoch-<k>/`` (its `done` marker included), and records
it as the runner's local loop does, rewriting the predictions and report.json; so outputs, `--resume`
and the report are the same, and a driver that dies loses nothing already received.

A node on another machine than the driver fetches the task's files from the driver through a small
actor on the driver's node, which serves only the runner's task directories.

Ctrl-C and SIGTERM on the driver act as with the local backend, through the same `StopRequest` and
record keeping (`backends.local`): the first drains (no instance starts any more, the running ones
finish, are shipped back and recorded), the second cancels the running ones (their Ray workers end,
and their containers with them); an instance that fails after the stop is not recorded. Then the
run's containers are removed on every live node and `KeyboardInterrupt` is raised, and `--resume`
reruns exactly the attempts without a `done` marker (`ray_backend.run_on_ray`).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import checks
from harness.config import Config, Secrets
from harness.evaluation.attempts import Attempt
from harness.evaluation.backends import Batch
from harness.evaluation.backends.local import finish_instance
from harness.evaluation.instance_files import Prediction
from harness.evaluation.one_instance import evaluate_instance
from harness.evaluation.options import RUN_LABEL, EvalOptions, StopRequest
from harness.evaluation.progress import SilentEvents
from harness.evaluation.ray_backend import Outcome, connection, import_ray, quiet_stdout, run_on_ray
from harness.evaluation.ray_resources import TaskResources
from harness.evaluation.report import InstanceRecord, write_done
from harness.evaluation.stages import Stages
from sandbox.transfer import pack_directory, safe_extract

MAX_BYTES = 2 * 1024 ** 3       # an attempt's folder or a task's files shipped between nodes
MAX_FILES = 200_000
MAX_RETRIES = 2                 # reruns of an attempt whose node or worker was lost


class TaskFiles:
    """Serves the runner's task directories from the driver's machine (a Ray actor there)."""

    def __init__(self, dirs: list[str]) -> None:
        self._dirs = set(dirs)

    def pack(self, path: str) -> bytes:
        if path not in self._dirs:
            raise PermissionError(f"{path!r} is not one of this evaluation's task directories")
        return pack_directory(Path(path), MAX_BYTES, MAX_FILES)


@dataclass(frozen=True)
class Shipped:
    """What a node sends back: the attempt's record and its folder as a tar."""

    record: InstanceRecord | None
    folder: bytes


@dataclass(frozen=True)
class RemoteInstance:
    """The per-attempt job, picklable: everything `evaluate_instance` needs, rebuilt on the node."""

    config: Config
    secrets: Secrets
    options: EvalOptions
    labels: Mapping[str, str]
    model_name: str
    predictions: Mapping[str, Prediction] | None
    driver_host: str
    files: Any                        # the TaskFiles actor handle
    ship: bool | None = None          # fetch the task's files: None = when not on the driver's machine

    def __call__(self, attempt: Attempt) -> Shipped:
        with tempfile.TemporaryDirectory(prefix="harness-ray-") as tmp:
            attempt = self._local_task(attempt, Path(tmp) / "task")
            out = Path(tmp) / "out"
            cancel = threading.Event()
            stages = Stages(self.config, self.secrets, self.options, self.labels, cancel, SilentEvents(),
                            self.predictions)
            try:
                record = evaluate_instance(attempt, stages, out, self.model_name, cancel)
            finally:
                stages.close()
            return Shipped(record, pack_directory(attempt.folder(out), MAX_BYTES, MAX_FILES, skip=set()))

    def _local_task(self, attempt: Attempt, where: Path) -> Attempt:
        ship = self.ship if self.ship is not None else socket.gethostname() != self.driver_host
        if not ship:
            return attempt
        import ray  # noqa: PLC0415 - optional extra (harness[ray]); this runs only on a Ray worker, where it is installed
        safe_extract(ray.get(self.files.pack.remote(str(attempt.task.repo_dir))), where, MAX_BYTES, MAX_FILES)
        return dataclasses.replace(attempt, task=dataclasses.replace(attempt.task, repo_dir=where))


class RayBackend:
    """Each pending attempt as one Ray task, on the cluster at `address` (None: a one-machine Ray)."""

    def __init__(self, address: str | None) -> None:
        self.address = address

    def evaluate(self, pending: list[Attempt], batch: Batch) -> None:
        def draining(dropped: int, running: int) -> None:
            batch.stages.events.message(
                f"stopping: {dropped} instance(s) will not start; waiting for the {running} running to "
                "finish (Ctrl-C or SIGTERM again cancels them)")

        try:
            evaluate_on_ray(pending, batch.stages, batch.out, batch.model_name, lambda r: finish_instance(r, batch),
                            address=self.address, stop=batch.stop, on_drain=draining)
        except KeyboardInterrupt:
            batch.report()
            batch.stages.events.message(f"stopped: the run's Ray tasks were cancelled and their containers "
                                        f"removed; finished instances are kept in {batch.out}, rerun with "
                                        "--resume to continue")
            raise
        if batch.stop.draining:
            batch.report()
            batch.stages.events.message(f"stopped: the running instances finished; the others are left for "
                                        f"--resume (finished instances are kept in {batch.out})")
            raise KeyboardInterrupt("stopped")


def evaluate_on_ray(attempts: list[Attempt], stages: Stages, out: Path, model_name: str,
                    on_record: Callable[[InstanceRecord], None], *, address: str | None,
                    max_retries: int = MAX_RETRIES, ship: bool | None = None, stop: StopRequest | None = None,
                    on_drain: Callable[[int, int], None] | None = None) -> None:
    """Evaluate `attempts` as Ray tasks; `on_record` gets each record once its folder is in `out`.

    `stages`: the run's `Stages` (its config, secrets, options, labels and predictions are sent).
    `stop`, `on_drain`: as for `run_on_ray`.
    """
    ray = import_ray()
    with quiet_stdout(), connection(ray, address):
        _evaluate(ray, attempts, stages, out, model_name, on_record, address, max_retries, ship, stop, on_drain)


def _evaluate(ray: Any, attempts: list[Attempt], stages: Stages, out: Path, model_name: str,
              on_record: Callable[[InstanceRecord], None], address: str | None, max_retries: int,
              ship: bool | None, stop: StopRequest | None, on_drain: Callable[[int, int], None] | None) -> None:
    job = RemoteInstance(stages.config, stages.secrets, stages.options, dict(stages.labels), model_name,
                         stages.predictions, socket.gethostname(), _task_files(ray, attempts), ship)

    def arrived(outcome: Outcome[Attempt, Shipped]) -> None:
        on_record(_receive(outcome, out, model_name))

    run_on_ray(job, attempts, address=address, max_retries=max_retries, on_result=arrived,
               resources_per_item=TaskResources.from_limits(stages.config.sandbox.limits),
               sweep_label=f"{RUN_LABEL}={stages.labels[RUN_LABEL]}", stop=stop, on_drain=on_drain)


def _task_files(ray: Any, attempts: list[Attempt]) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - optional extra, as `ray` is
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    actor = ray.remote(TaskFiles).options(num_cpus=0, scheduling_strategy=here)
    return actor.remote(sorted({str(a.task.repo_dir) for a in attempts}))


def _receive(outcome: Outcome[Attempt, Shipped], out: Path, model_name: str) -> InstanceRecord:
    """Put the shipped folder in place (or record the infrastructure failure); the record, with retries."""
    attempt, folder = outcome.item, outcome.item.folder(out)
    incoming = folder.with_name(f".{folder.name}.incoming")
    checks.remove_tree(incoming, out)
    for level in (out / "instances", incoming.parent, incoming):
        checks.private_dir(level)
    if outcome.result is not None and outcome.result.record is not None:
        safe_extract(outcome.result.folder, incoming, MAX_BYTES, MAX_FILES)
        _private_tree(incoming)
        record = outcome.result.record
    else:
        where = ", ".join(f"{a.host} pid {a.pid}" for a in outcome.attempts) or "no node"
        error = f"infrastructure: {outcome.error}; attempts on {where}"
        record = InstanceRecord(instance_id=attempt.task.id, status="error", model_name_or_path=model_name,
                                error=error, epoch=attempt.epoch)
        checks.write_file(incoming / "error.txt", error + "\n")
    record.infra_retries = outcome.infra_retries
    write_done(incoming, record)
    checks.remove_tree(folder, out)
    os.replace(incoming, folder)
    return record


def _private_tree(folder: Path) -> None:
    """Refuse a received folder that holds a link (an instance folder never does), then make its
    folders 0700 and its files 0600, as the run's own files are."""
    checks.refuse_links(folder)
    for base, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(base, name), 0o700)
        for name in files:
            os.chmod(os.path.join(base, name), 0o600)
