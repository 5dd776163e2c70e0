"""`harness eval --agent tiny --backend ray` on a real Ray cluster of this machine (a head and a worker node):
the third-party agent runs inside the sandbox on a Ray worker, its model calls answered by that worker's
gateway; the report is the local backend's, shape and figures (times aside); no container of the run is left."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.evaluation.ray_cluster import LocalCluster, RayNode

REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = REPO / "tasks" / "wordcount"
pytestmark = [pytest.mark.docker, pytest.mark.slow]
TIMES = ("duration", "durations", "time")      # wall times differ from run to run


def _eval(out: Path, mark: str, *extra: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "eval", str(WORDCOUNT), "--agent", "tiny",
                           "--model", "scripted:wordcount-bash", "--out", str(out), "--label", "harness.test=1",
                           "--label", mark, "--json", *extra], capture_output=True, text=True, timeout=1800, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def _without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in TIMES}
    return value


def test_eval_of_a_third_party_agent_on_ray_reports_as_the_local_backend_does(
        ray_cluster: LocalCluster, ray_worker: RayNode, docker_client: Any, tmp_path: Path) -> None:
    mark = f"harness.raytest={uuid.uuid4().hex[:8]}"
    local = _eval(tmp_path / "local", mark)
    on_ray = _eval(tmp_path / "ray", mark, "--backend", "ray", "--ray-address", ray_cluster.address)
    assert on_ray["agent"] == local["agent"] == "tiny"
    assert on_ray["resolved_ids"] == local["resolved_ids"] == ["wordcount"]
    assert _without_times(on_ray) == _without_times(local)            # every key and value, times aside
    row = on_ray["instances"]["wordcount"]
    assert (row["agent"], row["stop_reason"], row["turns"], row["cost_usd"]) == ("tiny", "end", 4, None)
    folder = tmp_path / "ray" / "instances" / "wordcount"
    for name in ("calls.jsonl", "agent.log", "trajectory.jsonl", "patch.diff", "result.json", "test_output.txt"):
        assert (folder / name).is_file(), name                        # shipped back from the worker whole
    assert json.loads((folder / "result.json").read_text())["agent"] == "tiny"
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    assert [c["outcome"] for c in calls] == ["answered"] * 4
    assert docker_client.api.containers(all=True, filters={"label": mark}) == []
