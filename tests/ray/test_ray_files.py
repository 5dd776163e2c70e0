"""Files crossing machines: a node fetches the task's files from the driver's machine (as a node on
another machine does) and ships the instance folder back; the driver serves only the run's tasks."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from harness.config import Config, Secrets
from harness.core.task import load_task
from harness.evaluation.attempts import Attempt
from harness.evaluation.backends.ray import TaskFiles, evaluate_on_ray
from harness.evaluation.options import RUN_LABEL, EvalOptions
from harness.evaluation.progress import SilentEvents
from harness.evaluation.ray_cluster import LocalCluster, RayNode
from harness.evaluation.report import InstanceRecord, read_done
from harness.evaluation.stages import Stages
from sandbox.transfer import safe_extract

TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / "pagination"


def test_a_node_that_fetches_the_task_files_from_the_driver_grades_the_instance(
        ray_cluster: LocalCluster, ray_worker: RayNode, tmp_path: Path) -> None:
    task = load_task(TASK_DIR)
    options = EvalOptions(out_dir=tmp_path, model="gold", labels={"harness.test": "1"})
    stages = Stages(Config(), Secrets(), options, {RUN_LABEL: "raytest", "harness.test": "1"}, threading.Event(),
                    SilentEvents(), None)
    records: list[InstanceRecord] = []
    evaluate_on_ray([Attempt(task)], stages, tmp_path, "gold", records.append, address=ray_cluster.address, ship=True)
    assert [(r.instance_id, r.status, r.infra_retries) for r in records] == [("pagination", "resolved", 0)]
    folder = tmp_path / "instances" / "pagination"
    assert read_done(folder) == records[0]
    assert (folder / "patch.diff").read_text() == records[0].model_patch != ""
    assert not list(tmp_path.glob("instances/.*.incoming"))


def test_the_driver_serves_only_the_runs_task_directories(tmp_path: Path) -> None:
    files = TaskFiles([str(TASK_DIR)])
    safe_extract(files.pack(str(TASK_DIR)), tmp_path / "copy", 10 ** 8, 10_000)
    assert (tmp_path / "copy" / "task.json").read_text() == (TASK_DIR / "task.json").read_text()
    with pytest.raises(PermissionError) as info:
        files.pack("/etc")
    assert str(info.value) == "'/etc' is not one of this evaluation's task directories"
