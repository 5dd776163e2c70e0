"""The local backend: a thread pool on this machine.

Each worker thread handles one instance at a time and spends its time waiting on Docker or a model
API, so threads are enough. On an interrupt the run's containers are removed (the workers then fail
fast and unwind) and the finished instances stay written.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from harness.core.task import Task
from harness.evaluation.backends import Batch
from harness.evaluation.instance import evaluate_instance
from harness.evaluation.options import RUN_LABEL
from sandbox.docker_client import client_or_default
from sandbox.reaper import remove_containers


class ThreadPoolBackend:
    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)

    def evaluate(self, pending: list[Task], batch: Batch) -> None:
        stages, cancel = batch.stages, batch.stages.cancel
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="eval")
        try:
            futures = {pool.submit(evaluate_instance, t, stages, batch.out, batch.model_name, cancel): t.id
                       for t in pending}
            for future in as_completed(futures):
                record = future.result()
                if record is not None:
                    batch.finish(record)
        except BaseException:
            cancel.set()
            pool.shutdown(wait=False, cancel_futures=True)
            removed = _remove_run_containers(batch.run_id)
            _wait_for_workers(pool, timeout=30.0)
            removed += _remove_run_containers(batch.run_id)
            batch.report()
            stages.events.message(f"stopped: removed {removed} container(s); finished instances are kept in "
                                  f"{batch.out}, rerun with --resume to continue")
            raise
        pool.shutdown(wait=True)


def _wait_for_workers(pool: ThreadPoolExecutor, timeout: float) -> None:
    """Give the workers a moment to notice their containers are gone and unwind."""
    deadline = time.monotonic() + timeout
    for thread in list(getattr(pool, "_threads", ())):
        thread.join(max(0.0, deadline - time.monotonic()))


def _remove_run_containers(run_id: str) -> int:
    """Remove every container of the run `run_id` (running or not); returns how many."""
    return len(remove_containers(client_or_default(), [f"{RUN_LABEL}={run_id}"]))
