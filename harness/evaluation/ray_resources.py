"""What one instance asks of a Ray node, and whether the cluster can give it.

A node offers the custom resource ``docker`` when Docker runs there (``ray start --resources=
'{"docker": 1}'``). Each task asks for a sliver of it, so it only lands on such nodes, plus the CPUs
and memory of one sandbox (`sandbox.api.Limits`) and of the harness process that drives it, so Ray
never places more instances on a node than the node can hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from harness.errors import ConfigError
from sandbox.api import Limits

DOCKER_RESOURCE = "docker"
DOCKER_SLIVER = 0.001           # a task's share of a node's "docker" resource: only a placement marker
HARNESS_PROCESS_MEMORY = 256 * 1024 * 1024   # the harness process that drives one sandbox, bytes
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}


def parse_size(text: str) -> int:
    """Bytes in a Docker-style size ("2g", "512m", "1024k", "4096")."""
    value = str(text).strip().lower()
    number, unit = value.rstrip("bkmgt"), value[len(value.rstrip("bkmgt")):]
    unit = unit[:-1] if len(unit) == 2 and unit.endswith("b") else unit
    if unit not in _UNITS or not number.replace(".", "", 1).isdigit():
        raise ConfigError(f"sandbox memory limit {text!r} is not a size; expected a number with an optional "
                          "unit b, k, m, g or t, e.g. \"2g\" or \"512m\"")
    return int(float(number) * _UNITS[unit])


@dataclass(frozen=True)
class TaskResources:
    """What one instance asks of a node: its sandbox's CPUs and memory, plus the driving process."""

    cpus: float
    memory: int                    # bytes

    @staticmethod
    def from_limits(limits: Limits) -> TaskResources:
        # Ray accepts fractions of a CPU only below one; above, a whole number is asked for
        cpus = limits.cpus if limits.cpus <= 1 else float(math.ceil(limits.cpus))
        return TaskResources(cpus=cpus, memory=parse_size(limits.memory) + HARNESS_PROCESS_MEMORY)

    def ray_options(self) -> dict[str, Any]:
        return {"num_cpus": self.cpus, "memory": self.memory, "resources": {DOCKER_RESOURCE: DOCKER_SLIVER}}

    def describe(self) -> str:
        return f"{self.cpus:g} CPU and {self.memory / 1024 ** 3:.2f} GiB of memory"


def check_capacity(ray: ModuleType, need: TaskResources) -> None:
    """Refuse to start when no live node has Docker and room for one instance (it would wait forever)."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    docker_nodes = [n["Resources"] for n in nodes if n["Resources"].get(DOCKER_RESOURCE, 0) > 0]
    if not docker_nodes:
        raise ConfigError(f"no node of the Ray cluster offers the resource {DOCKER_RESOURCE!r} ({len(nodes)} "
                          "live node(s)); start each node that runs Docker with it, e.g. `ray start "
                          "--address=HEAD:6379 --resources='{\"docker\": 1}'`")
    if not any(r.get("CPU", 0) >= need.cpus and r.get("memory", 0) >= need.memory for r in docker_nodes):
        offered = "; ".join(f"{r.get('CPU', 0):g} CPU, {r.get('memory', 0) / 1024 ** 3:.2f} GiB" for r in docker_nodes)
        raise ConfigError(f"no Docker node of the Ray cluster can hold one instance, which needs "
                          f"{need.describe()} (the sandbox limits plus the harness process); the nodes offer: "
                          f"{offered}. Lower sandbox.limits (cpus, memory) or start larger nodes, e.g. "
                          "`ray start --num-cpus 4 --memory 8589934592`")
