"""The local backend: a thread pool on this machine.

Each worker thread handles one attempt (`harness.evaluation.attempts`) at a time and spends its time
waiting on Docker or a model API, so threads are enough. The main thread waits for the attempts a
fraction of a second at a time and watches the batch's `StopRequest` (raised by Ctrl-C or SIGTERM, see
`runner.stop_signals`):

- **drain** (the first request): no instance starts any more; the running ones finish and are
  recorded. An instance that ends in an infrastructure error after the request is not recorded (its
  `done` is removed): a Ctrl-C on a terminal also reaches the harness's child processes, and the
  failure that caused is not the instance's;
- **cancel** (the second, or any exception of the backend): the run's containers are removed, the
  workers fail fast and unwind, nothing of the running instances is recorded.

Either way the finished instances stay written, the outputs are rebuilt from them, no container of
the run is left, and `KeyboardInterrupt` is raised for the caller to exit 130.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from harness.evaluation.attempts import Attempt, attempt_dir
from harness.evaluation.backends import Batch
from harness.evaluation.one_instance import evaluate_instance
from harness.evaluation.options import RUN_LABEL, Cancelling, StopRequest
from harness.evaluation.report import DONE, InstanceRecord
from sandbox.docker_client import client_or_default
from sandbox.reaper import remove_containers

POLL_SECONDS = 0.2


class ThreadPoolBackend:
    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)

    def evaluate(self, pending: list[Attempt], batch: Batch) -> None:
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="eval")
        try:
            futures = {pool.submit(_unless_stopped, a, batch): a.key for a in pending}
            self._collect(futures, batch)
        except BaseException:
            _cancel(pool, batch)
            raise
        pool.shutdown(wait=True)
        if batch.stop.draining:
            removed = _remove_run_containers(batch.run_id)   # none is expected: each owner removed its own
            batch.report()
            batch.stages.events.message(f"stopped: the running instances finished; removed {removed} container(s)")
            raise KeyboardInterrupt("stopped")

    def _collect(self, futures: dict[Future[InstanceRecord | None], str], batch: Batch) -> None:
        waiting, announced = set(futures), False
        while waiting:
            done, waiting = wait(waiting, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
            for future in done:
                record = None if future.cancelled() else future.result()
                if record is not None:
                    _finish(record, batch)
            if batch.stop.level >= StopRequest.CANCEL:
                raise Cancelling()
            if batch.stop.draining and not announced:
                announced = True
                dropped = sum(f.cancel() for f in waiting)
                running = sum(1 for f in waiting if not f.cancelled())
                batch.stages.events.message(
                    f"stopping: {dropped} instance(s) will not start; waiting for the {running} running to "
                    "finish (Ctrl-C or SIGTERM again cancels them)")


def _unless_stopped(attempt: Attempt, batch: Batch) -> InstanceRecord | None:
    """`evaluate_instance`, unless a stop was asked before this worker took the attempt."""
    if batch.stop.draining:
        return None
    return evaluate_instance(attempt, batch.stages, batch.out, batch.model_name, batch.stages.cancel)


def _finish(record: InstanceRecord, batch: Batch) -> None:
    if record.status == "error" and batch.stop.draining:
        (attempt_dir(batch.out, record.instance_id, record.epoch) / DONE).unlink(missing_ok=True)
        batch.stages.events.message(f"{record.key}: failed after the stop ({record.error}); not recorded, "
                                    "--resume reruns it")
        return
    batch.finish(record)


def _cancel(pool: ThreadPoolExecutor, batch: Batch) -> None:
    """Cancel the running instances: remove the run's containers, let the workers unwind, write the outputs."""
    batch.stages.cancel.set()
    pool.shutdown(wait=False, cancel_futures=True)
    removed = _remove_run_containers(batch.run_id)
    _wait_for_workers(pool, timeout=30.0)
    removed += _remove_run_containers(batch.run_id)
    batch.report()
    batch.stages.events.message(f"stopped: cancelled the running instances, removed {removed} container(s)")


def _wait_for_workers(pool: ThreadPoolExecutor, timeout: float) -> None:
    """Give the workers a moment to notice their containers are gone and unwind."""
    deadline = time.monotonic() + timeout
    for thread in list(getattr(pool, "_threads", ())):
        thread.join(max(0.0, deadline - time.monotonic()))


def _remove_run_containers(run_id: str) -> int:
    """Remove every container of the run `run_id` (running or not); returns how many."""
    return len(remove_containers(client_or_default(), [f"{RUN_LABEL}={run_id}"]))


def finish_instance(record: InstanceRecord, batch: Batch) -> None:
    """Record a finished instance as this backend does: an infrastructure error after a stop is not
    recorded (`--resume` reruns it). The Ray backend records its instances through it too."""
    _finish(record, batch)
