"""Running a per-item job on a Ray cluster: one Ray task per item, on nodes that have Docker, results
handed back as they complete.

`run_on_ray(job, items, ...)` is the whole seam: the batch runner gives it the job that evaluates one
instance and a callback that writes each finished result, so a driver that dies keeps everything
already handed over. Ray is an optional extra, imported only here and only when asked for.

Without an address, the run gets its own one-machine cluster (`ray_cluster.LocalCluster`): every
listener on 127.0.0.1, token authentication on with a token made for it, stopped with the run.

Scheduling: each task asks for what `ray_resources.TaskResources` derives from the sandbox limits,
on nodes that offer the ``docker`` resource.

Failures: a task whose worker or node dies is rerun by Ray elsewhere (`max_retries`), as is a job
that raises an infrastructure error (`retry_on`, SandboxError by default). Every execution first
signs a ledger (a small actor on the driver's node), so the result knows how many attempts it took
and where; a rerun first reaps the containers whose owner process is gone on its own node, and the
driver reaps on the earlier attempts' nodes that are still alive.

Stopping (`stop`, the batch's `StopRequest`, raised by Ctrl-C or SIGTERM on the driver): the first
request **drains**: the ledger is closed, so an item that has not signed it never starts its job (its
queued task is cancelled, one already on a worker returns at once), and the items that signed it run
to their end and are handed to `on_result`. The second request, or any exception, **cancels**: every
task not yet handed over is force-cancelled (Ray ends its worker process, and with it, through their
lifelines, the worker's containers). Either way, the containers that carry `sweep_label` are then
removed on every live Docker node, so nothing of the run is left running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, TypeVar

from harness.errors import ConfigError
from harness.evaluation.options import Cancelling, StopRequest
from harness.evaluation.ray_cluster import LocalCluster, is_loopback, keep_loopback
from harness.evaluation.ray_resources import DOCKER_RESOURCE, DOCKER_SLIVER, TaskResources, check_capacity
from sandbox.docker_client import client_or_default
from sandbox.errors import SandboxError
from sandbox.reaper import reap, remove_containers

X = TypeVar("X")
R = TypeVar("R")

INSTALL_LINE = "pip install 'harness[ray]'"
POLL_SECONDS = 0.2              # how often the driver looks at the stop request while tasks run
CANCEL_WAIT_SECONDS = 30.0      # how long a cancel waits for the cancelled tasks' workers to end


def import_ray() -> ModuleType:
    """The `ray` module, or a ConfigError saying how to install it."""
    try:
        import ray  # noqa: PLC0415 - optional extra (pip install 'harness[ray]'): imported only when a Ray run is asked for
    except ImportError as exc:
        raise ConfigError(f"--backend ray needs Ray, which is not installed here ({exc}); install it with "
                          f"`{INSTALL_LINE}` (or `pip install 'ray[default]>=2.9'`), or use --backend local") from exc
    return ray


@dataclass(frozen=True)
class Execution:
    """One execution of an item: where it ran."""

    node_id: str
    host: str
    pid: int


@dataclass(frozen=True)
class Outcome(Generic[X, R]):
    """An item's end: the job's result, or why there is none, and every attempt it took."""

    item: X
    result: R | None
    error: str | None = None          # set when no attempt finished: the last failure, with its type
    attempts: tuple[Execution, ...] = ()
    reaped: tuple[str, ...] = ()      # containers and volumes of earlier attempts removed on retry

    @property
    def infra_retries(self) -> int:
        """Executions lost to the infrastructure (a dead node or worker, a Docker failure)."""
        return max(0, len(self.attempts) - 1)


class Ledger:
    """Counts the executions of each item; lives in one actor on the driver's node. Once closed (a
    drain), no execution may begin: an actor runs one call at a time, so after `close` returns, the
    items it names are exactly those that will ever have started."""

    def __init__(self) -> None:
        self._attempts: dict[int, list[Execution]] = {}
        self._closed = False

    def begin(self, key: int, attempt: Execution) -> list[Execution] | None:
        """Record `attempt` of item `key`; returns the attempts before it, or None once closed (the
        item must not start)."""
        if self._closed:
            return None
        earlier = self._attempts.setdefault(key, [])
        before = list(earlier)
        earlier.append(attempt)
        return before

    def attempts(self, key: int) -> list[Execution]:
        return list(self._attempts.get(key, []))

    def close(self) -> list[int]:
        """No execution begins any more; returns the keys of the items that began."""
        self._closed = True
        return sorted(self._attempts)


def reap_here() -> list[str]:
    """Remove this machine's harness containers whose owner process is gone; their names."""
    return reap(client_or_default())


def execute(job: Callable[[X], R], item: X, key: int,
            ledger: Any) -> tuple[R, tuple[Execution, ...], tuple[str, ...]] | None:
    """The Ray task: sign the ledger, reap what an earlier attempt left here, run the job; None without
    running it when the ledger is closed (the run is draining)."""
    import ray  # noqa: PLC0415 - optional extra; this runs on a Ray worker, where it is installed
    me = Execution(node_id=ray.get_runtime_context().get_node_id(), host=socket.gethostname(), pid=os.getpid())
    before = ray.get(ledger.begin.remote(key, me))
    if before is None:
        return None
    reaped = tuple(reap_here()) if before else ()
    return job(item), (*before, me), reaped


@contextlib.contextmanager
def connection(ray: ModuleType, address: str | None) -> Iterator[None]:
    """Connected to the cluster at `address` ("auto": the one started with `ray start` on this
    machine), or to a one-machine cluster started for this run when `address` is None (loopback
    only, token authentication; stopped on leaving). Nothing is done when already connected."""
    if ray.is_initialized():
        yield
        return
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False, "namespace": "harness"}
    with contextlib.ExitStack() as stack:
        if address is None:
            cluster = stack.enter_context(LocalCluster(head_cpus=None, head_memory=None, object_store_memory=None))
            target = cluster.address
        else:
            check_address(address)
            target = address
        try:
            with keep_loopback() if is_loopback(target) else contextlib.nullcontext(), keep_sigterm():
                ray.init(address=target, **quiet)
        except ConnectionError as exc:
            raise ConfigError(_unreachable(target, exc)) from exc
        stack.callback(ray.shutdown)
        yield


@contextlib.contextmanager
def keep_sigterm() -> Iterator[None]:
    """`ray.init` sets the driver's SIGTERM handler to `sys.exit`; the handler that was there before
    (the runner's, which asks the run to stop) is put back afterwards (main thread only, where
    handlers live)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if before is None else before)   # None: set outside Python


def check_address(address: str | None, timeout: float = 5.0) -> None:
    """Refuse at once a HOST:PORT where no Ray head answers (Ray itself retries for minutes)."""
    if address is None or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray-address {address!r} is not HOST:PORT; e.g. --ray-address 10.0.0.5:6379, "
                          "or 'auto' on a node of the cluster")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(_unreachable(address, exc)) from exc


def _unreachable(address: str, exc: BaseException) -> str:
    return (f"cannot reach the Ray cluster at --ray-address {address} ({exc}); give the head's address as "
            "printed by `ray start --head`, e.g. --ray-address 10.0.0.5:6379, or 'auto' on a node of the cluster")


def run_on_ray(job: Callable[[X], R], items: Sequence[X], *, address: str | None,
               resources_per_item: TaskResources, max_retries: int, on_result: Callable[[Outcome[X, R]], None],
               retry_on: tuple[type[BaseException], ...] = (SandboxError,), sweep_label: str | None = None,
               stop: StopRequest | None = None, on_drain: Callable[[int, int], None] | None = None) -> None:
    """Run `job(item)` for every item as Ray tasks; call `on_result` in the driver as each one ends.

    `job` and the items must pickle (`job` is shipped once). `stop`: drained at its first level (no
    item starts any more, the started ones end and are handed over; `on_drain(not_started, running)`
    is told once), cancelled at the second, as is an interrupt or an exception from `on_result`
    (which then propagates): see the module docstring. An item that never started is not handed over.

    Raises:
        ConfigError: Ray is not installed, the cluster is unreachable, or no node can hold an instance.
    """
    ray = import_ray()
    with quiet_stdout(), connection(ray, address):
        _run(ray, job, items, resources_per_item, max_retries, on_result, retry_on, sweep_label,
             stop or StopRequest(), on_drain)


def quiet_stdout() -> contextlib.AbstractContextManager[Any]:
    """Ray's driver prints cluster events ("(raylet) ... terminated") on stdout from a thread of its
    own; while the driver is connected they go to stderr, keeping stdout for the command's output."""
    return contextlib.redirect_stdout(sys.stderr)


def _run(ray: ModuleType, job: Callable[[X], R], items: Sequence[X], resources_per_item: TaskResources,
         max_retries: int, on_result: Callable[[Outcome[X, R]], None],
         retry_on: tuple[type[BaseException], ...], sweep_label: str | None, stop: StopRequest,
         on_drain: Callable[[int, int], None] | None) -> None:
    pending: list[Any] = []
    try:
        check_capacity(ray, resources_per_item)
        ledger = _ledger(ray)
        task = ray.remote(execute).options(max_retries=max_retries, retry_exceptions=list(retry_on),
                                           **resources_per_item.ray_options())
        job_ref = ray.put(job)
        keys = {task.remote(job_ref, item, key, ledger): key for key, item in enumerate(items)}
        pending, cleanups, drained = list(keys), [], False
        while pending:
            if stop.level >= StopRequest.CANCEL:
                raise Cancelling()
            if stop.draining and not drained:
                drained = True
                _drain(ray, ledger, pending, keys, on_drain)
            done, pending = ray.wait(pending, num_returns=1, timeout=POLL_SECONDS)
            for ref in done:
                outcome = _collect(ray, ref, items[keys[ref]], keys[ref], ledger)
                if outcome is not None:
                    cleanups += _reap_elsewhere(ray, outcome)
                    on_result(outcome)
        if cleanups:
            ray.wait(cleanups, num_returns=len(cleanups), timeout=60)
    except BaseException:
        _cancel(ray, pending)
        if sweep_label:
            _sweep(ray, sweep_label)
        raise
    if stop.draining and sweep_label:
        _sweep(ray, sweep_label)     # none is expected: each worker's sandboxes went with their instance


def _drain(ray: ModuleType, ledger: Any, pending: list[Any], keys: dict[Any, int],
           on_drain: Callable[[int, int], None] | None) -> None:
    """Close the ledger and cancel the queued tasks of the items that never began (a task already on a
    worker returns at once: the ledger refuses it); the begun ones run on."""
    began = set(ray.get(ledger.close.remote()))
    waiting = [ref for ref in pending if keys[ref] not in began]
    for ref in waiting:
        ray.cancel(ref, force=False)
    if on_drain is not None:
        on_drain(len(waiting), len(pending) - len(waiting))


def _cancel(ray: ModuleType, pending: list[Any]) -> None:
    """Force-cancel `pending` (Ray ends their workers) and wait a while for them to be over."""
    for ref in pending:
        ray.cancel(ref, force=True)
    if pending:
        ray.wait(pending, num_returns=len(pending), timeout=CANCEL_WAIT_SECONDS)


def remove_labelled(label: str) -> list[str]:
    """Remove this machine's containers that carry `label` ("key=value"); their names."""
    return remove_containers(client_or_default(), [label])


def _on_node(ray: ModuleType, function: Callable[..., Any], node_id: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - optional extra, as `ray` is
    return ray.remote(function).options(num_cpus=0, resources={DOCKER_RESOURCE: DOCKER_SLIVER}, max_retries=0,
                                        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))


def _sweep(ray: ModuleType, label: str) -> None:
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["Resources"].get(DOCKER_RESOURCE, 0) > 0]
    refs = [_on_node(ray, remove_labelled, node).remote(label) for node in nodes]
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=60)


def _ledger(ray: ModuleType) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - optional extra, as `ray` is
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(Ledger).options(num_cpus=0, scheduling_strategy=here).remote()


def _collect(ray: ModuleType, ref: Any, item: X, key: int, ledger: Any) -> Outcome[X, Any] | None:
    """The item's outcome; None when it never started (refused by a closed ledger, or cancelled queued)."""
    from ray.exceptions import RayError, RayTaskError, TaskCancelledError  # noqa: PLC0415 - optional extra, as `ray` is
    try:
        returned = ray.get(ref)
        if returned is None:
            return None
        result, attempts, reaped = returned
        return Outcome(item, result, None, attempts, reaped)
    except TaskCancelledError:        # only a drain cancels a task and then collects it
        return None
    except RayTaskError as exc:       # the job raised, on its last allowed attempt
        cause = exc.cause if exc.cause is not None else exc
        error = f"{type(cause).__name__}: {cause}"
    except RayError as exc:           # its worker or node died, on its last allowed attempt
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    attempts = tuple(ray.get(ledger.attempts.remote(key)))
    return Outcome(item, None, f"{error} (after {len(attempts)} attempt(s))", attempts)


def _reap_elsewhere(ray: ModuleType, outcome: Outcome[Any, Any]) -> list[Any]:
    """Reap on the live nodes where earlier attempts ran (the last attempt's own node reaped itself)."""
    final = outcome.attempts[-1] if outcome.result is not None and outcome.attempts else None
    earlier = outcome.attempts[:-1] if final else outcome.attempts
    alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")} if earlier else set()
    nodes = {a.node_id for a in earlier if a.node_id in alive and (final is None or a.host != final.host)}
    return [_on_node(ray, reap_here, node).remote() for node in sorted(nodes)]
