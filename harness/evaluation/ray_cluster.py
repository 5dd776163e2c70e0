"""A real Ray cluster on this machine: one head and any number of worker nodes, each its own
`ray start --block` process tree, for the tests and the benchmark of the Ray backend.

Every process of the cluster carries the environment variable `HARNESS_RAY_CLUSTER=<id>` (Ray passes
its environment down to the raylet and the worker processes), so `LocalCluster.stop()` finds and
ends exactly the processes it started, by pid, and then checks that none is left. `kill_node()` ends
one node's whole process tree with SIGKILL, as a machine that is switched off.
Nodes listen on 127.0.0.1 only, on ports chosen free at start.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

MARKER = "HARNESS_RAY_CLUSTER"
MiB = 1024 * 1024
NODE_IP = "127.0.0.2"   # in the loopback range, yet not one Ray rewrites to the machine's address
# a test cluster on loopback: no token authentication (Ray turns it on when ~/.ray/auth_token exists),
# no usage reports, no 30 s drain on stop
BASE_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}


class ClusterError(RuntimeError):
    """A node of the local cluster did not start, or its processes did not stop."""


@dataclass
class RayNode:
    name: str
    process: subprocess.Popen[bytes]
    temp_dir: Path
    log: Path


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


def _tree(root: int) -> set[int]:
    """`root` and its live descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return tree


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class LocalCluster:
    """A head node plus worker nodes on this machine. Use as a context manager."""

    def __init__(self, *, head_cpus: int = 1, head_memory: int = 3072 * MiB, docker: bool = True,
                 root: Path | None = None) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.root = Path(root or tempfile.mkdtemp(prefix="hray-", dir="/tmp"))  # short: socket paths
        self.head_cpus, self.head_memory, self.docker = head_cpus, head_memory, docker
        self.nodes: list[RayNode] = []
        self.address = ""

    def __enter__(self) -> "LocalCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start the head; returns its address (host:port) for `ray.init` and `ray start --address`."""
        head = self._launch("head", ["--head", "--port=0", "--include-dashboard=false",
                                     f"--ray-client-server-port={_free_port()}",
                                     f"--dashboard-port={_free_port()}"], self.head_cpus, self.head_memory)
        self.address = (head.temp_dir / "ray_current_cluster").read_text().strip()
        return self.address

    def add_node(self, name: str, *, cpus: int = 1, memory: int = 3072 * MiB) -> RayNode:
        """Start a worker node that joins the head; returns once it runs."""
        if not self.address:
            raise ClusterError("start the head first: LocalCluster.start()")
        return self._launch(name, [f"--address={self.address}"], cpus, memory)

    def _launch(self, name: str, extra: list[str], cpus: int, memory: int) -> RayNode:
        temp_dir = self.root / name
        temp_dir.mkdir(parents=True)
        log = self.root / f"{name}.log"
        resources = {"docker": 1} if self.docker else {}
        ray_bin = str(Path(sys.executable).with_name("ray"))
        cmd = [ray_bin, "start", *extra, "--block", f"--node-ip-address={NODE_IP}", f"--temp-dir={temp_dir}",
               f"--num-cpus={cpus}", f"--memory={memory}", f"--object-store-memory={96 * MiB}",
               f"--resources={json.dumps(resources)}", f"--dashboard-agent-listen-port={_free_port()}",
               "--disable-usage-stats"]
        env = {**os.environ, **BASE_ENV, MARKER: self.id}
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
            if "Ray runtime started" in text and (node.temp_dir / "ray_current_cluster").is_file():
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
        if left:
            raise ClusterError(f"processes of ray cluster {self.id} still alive after stop: {sorted(left)}")
        shutil.rmtree(self.root, ignore_errors=True)
