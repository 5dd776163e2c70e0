"""A real Ray cluster on this machine: one head and any number of worker nodes, each its own
`ray start --block` process tree. It is the one-machine Ray of `harness eval --backend ray` without
`--ray-address`, and the cluster of the Ray backend's tests and benchmark.

Every process of the cluster carries the environment variable `HARNESS_RAY_CLUSTER=<id>` (Ray passes
its environment down to the raylet and the worker processes), so `LocalCluster.stop()` finds and
ends exactly the processes it started, by pid, and then checks that none is left. `kill_node()` ends
one node's whole process tree with SIGKILL, as a machine that is switched off.

Nobody else on the network or the machine can use the cluster:
- every listener of every node (GCS, raylets, workers, dashboard agent, client server) is on
  127.0.0.1. Ray binds its servers to loopback only when the node's IP is exactly "127.0.0.1", but
  `ray start` rewrites a loopback address (the node's and the head's) to the machine's network
  address (`services.resolve_ip_for_localhost`), and so does `ray.init` in a driver. `LAUNCH` runs
  `ray start` with that rewrite turned off, and `keep_loopback()` does the same around a driver's
  `ray.init`: the one change to Ray's behaviour here. A worker node then joins through 127.0.0.1
  and takes 127.0.0.1 as its own IP too;
- token authentication is always on (`RAY_AUTH_MODE=token`) with a token generated for this
  cluster into `<root>/auth/token` (0600, in 0700 folders only this user can enter). `start()` also
  points this process at it (the driver and its subprocesses need the token); `stop()` undoes that.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.core import process_tree as _tree  # `root` and its live descendants
from harness.core.interpreter import python_command

MARKER = "HARNESS_RAY_CLUSTER"
MiB = 1024 * 1024
NODE_IP = "127.0.0.1"
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN")
# no usage reports, no 30 s drain on stop
BASE_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
# `ray start`, keeping 127.0.0.1 as given (see the module docstring)
LAUNCH = ("import sys; from ray._private import services; services.resolve_ip_for_localhost = lambda host: host; "
          "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; sys.exit(main())")


class ClusterError(RuntimeError):
    """A node of the local cluster did not start, or its processes did not stop."""


@dataclass
class RayNode:
    name: str
    process: subprocess.Popen[bytes]
    temp_dir: Path
    log: Path


@contextlib.contextmanager
def keep_loopback() -> Iterator[None]:
    """While inside, this process's Ray keeps a loopback address as given (as `LAUNCH` does for the
    nodes), so that a driver can join a cluster that listens on 127.0.0.1 only."""
    from ray._private import services  # noqa: PLC0415 - optional extra (harness[ray]), imported only for a Ray run
    original = services.resolve_ip_for_localhost
    services.resolve_ip_for_localhost = lambda host: host
    try:
        yield
    finally:
        services.resolve_ip_for_localhost = original


def is_loopback(address: str) -> bool:
    """Whether HOST:PORT names this machine's loopback (127.0.0.0/8, ::1, localhost)."""
    host = address.rpartition(":")[0].strip("[]") if ":" in address else address
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def marked_pids(cluster_id: str) -> set[int]:
    """Pids of the live processes whose environment holds `HARNESS_RAY_CLUSTER=cluster_id`."""
    needle = f"{MARKER}={cluster_id}".encode()
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
        except OSError:
            continue   # gone meanwhile, or not ours to read
    return found


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class LocalCluster:
    """A head node plus worker nodes on this machine. Use as a context manager."""

    def __init__(self, *, head_cpus: int | None = 1, head_memory: int | None = 3072 * MiB, docker: bool = True,
                 object_store_memory: int | None = 96 * MiB, root: Path | None = None) -> None:
        """`None` for a size: Ray's own choice (the machine's CPUs, memory, a share of it)."""
        self.id = uuid.uuid4().hex[:12]
        self.root = Path(root or tempfile.mkdtemp(prefix="hray-", dir="/tmp"))  # short: socket paths
        os.chmod(self.root, 0o700)
        self.head_cpus, self.head_memory, self.docker = head_cpus, head_memory, docker
        self.object_store_memory = object_store_memory
        self.token_file = self.root / "auth" / "token"
        self.nodes: list[RayNode] = []
        self.address = ""
        self._saved_env: dict[str, str | None] | None = None

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start the head; returns its address (host:port) for `ray.init` and `ray start --address`.
        From here on this process uses the cluster's token (see the module docstring)."""
        self._write_token()
        self._use_token()
        head = self._launch("head", ["--head", "--port=0", "--include-dashboard=false",
                                     f"--node-ip-address={NODE_IP}", f"--dashboard-host={NODE_IP}",
                                     f"--ray-client-server-port={_free_port()}",
                                     f"--dashboard-port={_free_port()}"], self.head_cpus, self.head_memory)
        self.address = (head.temp_dir / "ray_current_cluster").read_text().strip()
        return self.address

    def auth_env(self) -> dict[str, str]:
        """The variables a process needs to use this cluster (token authentication)."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token_file)}

    def _write_token(self) -> None:
        self.token_file.parent.mkdir(mode=0o700)
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))

    def _use_token(self) -> None:
        """Point this process (Ray's driver, and the subprocesses it starts) at the cluster's token."""
        if self._saved_env is None:
            self._saved_env = {name: os.environ.get(name) for name in AUTH_VARS}
        os.environ.pop("RAY_AUTH_TOKEN", None)
        os.environ.update(self.auth_env())
        _reload_ray_auth()

    def _restore_env(self) -> None:
        if self._saved_env is None:
            return
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env = None
        _reload_ray_auth()

    def add_node(self, name: str, *, cpus: int = 1, memory: int = 3072 * MiB) -> RayNode:
        """Start a worker node that joins the head; returns once it runs."""
        if not self.address:
            raise ClusterError("start the head first: LocalCluster.start()")
        return self._launch(name, [f"--address={self.address}", f"--node-ip-address={NODE_IP}"], cpus, memory)

    def _launch(self, name: str, extra: list[str], cpus: int | None, memory: int | None) -> RayNode:
        temp_dir = self.root / name
        temp_dir.mkdir(mode=0o700, parents=True)
        log = self.root / f"{name}.log"
        resources = {"docker": 1} if self.docker else {}
        sizes = [f"--num-cpus={cpus}"] if cpus is not None else []
        sizes += [f"--memory={memory}"] if memory is not None else []
        sizes += [f"--object-store-memory={self.object_store_memory}"] if self.object_store_memory else []
        cmd = [*python_command("-c", LAUNCH), "start", *extra, "--block", f"--temp-dir={temp_dir}", *sizes,
               f"--resources={json.dumps(resources)}", f"--dashboard-agent-listen-port={_free_port()}",
               "--disable-usage-stats"]
        inherited = {k: v for k, v in os.environ.items() if k not in AUTH_VARS}
        env = {**inherited, **BASE_ENV, **self.auth_env(), MARKER: self.id}
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
        node = RayNode(name, proc, temp_dir, log)
        self.nodes.append(node)
        self._wait_started(node, timeout=90.0)
        return node

    def _wait_started(self, node: RayNode, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = node.log.read_text(errors="replace")
            address = node.temp_dir / "ray_current_cluster"     # written after `ray start` says it started,
            if "Ray runtime started" in text and address.is_file() and address.read_text().strip():   # not at once
                return
            if node.process.poll() is not None:
                raise ClusterError(f"ray node {node.name!r} exited with {node.process.returncode} while "
                                   f"starting; its log {node.log} ends with:\n{text[-2000:]}")
            time.sleep(0.2)
        raise ClusterError(f"ray node {node.name!r} did not start within {timeout:.0f}s; see {node.log}")

    def kill_node(self, node: RayNode) -> int:
        """End `node`'s whole process tree at once with SIGKILL (a lost machine); returns how many."""
        pids = _tree(node.process.pid)
        _signal_all(pids, signal.SIGKILL)
        node.process.wait(timeout=30)
        return len(pids)

    def stop(self, timeout: float = 40.0) -> None:
        """Stop every node (SIGTERM, then SIGKILL), then check that none of their processes is left.

        Raises:
            ClusterError: a process of this cluster is still alive afterwards (its pids are named).
        """
        for node in reversed(self.nodes):
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while marked_pids(self.id) and time.monotonic() < deadline:
            time.sleep(0.25)
        survivors = marked_pids(self.id)
        _signal_all(survivors, signal.SIGKILL)
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.wait(timeout=10)
        time.sleep(0.2)
        left = marked_pids(self.id)
        self._restore_env()
        if left:
            raise ClusterError(f"processes of ray cluster {self.id} still alive after stop: {sorted(left)}")
        shutil.rmtree(self.root, ignore_errors=True)


def _reload_ray_auth() -> None:
    """Make an already imported Ray read the authentication variables again (its mode is cached)."""
    if "ray" not in sys.modules:
        return                       # Ray reads them when it is imported
    # optional extra, only when Ray is loaded; its private module has no type information
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]  # noqa: PLC0415
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
