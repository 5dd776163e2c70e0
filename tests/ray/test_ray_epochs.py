"""`harness eval --backend ray --epochs 2` of a third-party agent on a real Ray cluster (a head and a
worker node on this machine): each attempt one Ray task, its folder shipped back into
instances/<id>/epoch-<k>/, the planned outcome of each epoch, and --resume rerunning only the attempt
without a `done`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.evaluation.ray_cluster import LocalCluster, RayNode

REPO = Path(__file__).resolve().parents[2]


def _eval(out: Path, address: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli.main", "eval", str(REPO / "tasks" / "wordcount"),
                           "--agent", "tiny", "--model", "scripted:epochs-mixed", "--epochs", "2", "--backend", "ray",
                           "--ray-address", address, "--out", str(out), "--label", "harness.test=1", "--json", *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=1500)


def test_a_third_party_agent_evaluated_on_ray_over_two_epochs_then_resumed(
        ray_cluster: LocalCluster, ray_worker: RayNode, docker_client: Any, tmp_path: Path) -> None:
    out = tmp_path / "ray"
    done = _eval(out, ray_cluster.address)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["attempts"]["per_instance"]["wordcount"]["statuses"] == ["resolved", "empty_patch"]
    assert report["resolved_ids"] == ["wordcount"] and report["attempts"]["flipped_ids"] == ["wordcount"]
    for epoch, status in ((1, "resolved"), (2, "empty_patch")):
        folder = out / "instances" / "wordcount" / f"epoch-{epoch}"
        record = json.loads((folder / "done").read_text())
        assert (record["epoch"], record["status"], record["infra_retries"]) == (epoch, status, 0)
        assert json.loads((folder / "result.json").read_text())["agent"] == "tiny"
        assert (folder / "calls.jsonl").is_file() and (folder / "trajectory.jsonl").is_file()
    assert not list(out.glob("instances/**/.*.incoming"))
    patches = [json.loads(line)["model_patch"] for n in (1, 2)
               for line in (out / f"predictions.epoch-{n}.jsonl").read_text().splitlines()]
    assert "ranked[:n]" in patches[0] and patches[1] == ""

    kept = (out / "instances" / "wordcount" / "epoch-1" / "done").stat().st_mtime_ns
    (out / "instances" / "wordcount" / "epoch-2" / "done").unlink()
    again = _eval(out, ray_cluster.address, "--resume")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming: 1 attempt(s) already finished, 1 to run" in again.stderr
    assert (out / "instances" / "wordcount" / "epoch-1" / "done").stat().st_mtime_ns == kept
    resumed = json.loads(again.stdout)["attempts"]
    assert {k: v for k, v in resumed.items() if k != "totals"} == {k: v for k, v in report["attempts"].items()
                                                                  if k != "totals"}
