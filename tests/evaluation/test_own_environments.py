"""A row that brings its own environment (`requirements`, `install_cmd`, `test_cmd`, `python`) goes through the
same machinery as a spec row: a venv environment image of its own lock, the project installed editable in
the instance layer (its metadata, console scripts and plugin entry points working), its import checked.
The row is pytest 4.4's SWE-bench Lite instance (the shared source tarball) with its fields written by hand:
its tests run through the project's own `pytest` console script, so they pass only when the project is
installed as the row says. Gold resolves, empty does not. About 4 minutes with an empty Docker cache."""

from __future__ import annotations

from pathlib import Path

import docker

from harness.environments.tags import KIND_LABEL
from harness.evaluation.instance_files import load_instances
from harness.evaluation.options import EvalOptions
from harness.evaluation.runner import run_evaluation
from tests.evaluation.conftest import SWEBENCH_DATA, TEST_LABELS

ROWS = Path(__file__).with_name("data") / "own_fields_rows.jsonl"


def test_a_row_with_its_own_fields_gets_a_venv_and_gold_resolves_while_empty_does_not(
        tmp_path: Path, docker_client: docker.DockerClient, config_and_secrets) -> None:  # type: ignore[no-untyped-def]
    [task] = load_instances(ROWS, SWEBENCH_DATA / "repos")
    env = task.environment
    assert env is not None and env.version_of is None and "pluggy==0.11.0" in env.pins
    assert task.log_parser == "pytest" and task.test_cmd.startswith("pytest ")      # the project's console script
    config, secrets = config_and_secrets
    reports = {}
    for model in ("gold", "empty"):
        options = EvalOptions(out_dir=tmp_path / model, model=model, workers=1, labels=TEST_LABELS)
        reports[model] = run_evaluation([task], options, config, secrets).to_dict()
    assert reports["gold"]["error_ids"] == [] and reports["gold"]["resolved_ids"] == [task.id], \
        reports["gold"]["instances"]
    assert reports["empty"]["resolved_ids"] == [] and reports["empty"]["error_ids"] == []
    empty_report = (tmp_path / "empty" / "instances" / task.id / "report.json").read_text()
    assert '"FAIL_TO_PASS"' in empty_report and '"resolved": false' in empty_report   # the tests ran, and failed
    # the image is an instance layer over a venv environment image, not the pinned image of the old path
    graded = (tmp_path / "gold" / "instances" / task.id / "test_output.txt").read_text()
    assert "rootdir: /workspace" in graded and "passed" in graded
    images = docker_client.images.list(filters={"label": [f"{KIND_LABEL}=environment"]})
    assert any("own requirements py3.9" in (i.labels or {}).values() for i in images)
