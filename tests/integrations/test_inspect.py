"""Inspect AI (the real package, harness[inspect]): `inspect eval` with `sandbox="harness"` on a real sandbox.

The tasks are in inspect_tasks.py: a scripted solver that checks exec / read_file / write_file against
Inspect's contract (errors, limits, timeouts), and Inspect's own bash tool driven by mockllm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai", reason="the inspect extra is not installed: pip install -e '.[inspect]'")
import anyio  # noqa: E402
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv  # noqa: E402

from harness.errors import HarnessError  # noqa: E402
from harness.integrations import Target, open_for_adapter  # noqa: E402
from harness.integrations.inspect_provider import (  # noqa: E402
    HarnessSandboxConfig,
    HarnessSandboxEnvironment,
    config_target,
)

pytestmark = pytest.mark.docker
TASKS = Path(__file__).with_name("inspect_tasks.py")


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> dict[str, dict[str, Any]]:
    """Both tasks of inspect_tasks.py, run once by the `inspect` CLI; their logs by task name."""
    log_dir = tmp_path_factory.mktemp("inspect-logs")
    inspect = Path(sys.executable).with_name("inspect")
    env = {**os.environ, "INSPECT_SANDBOX_MAX_EXEC_OUTPUT_SIZE": "4096", "INSPECT_SANDBOX_MAX_READ_FILE_SIZE": "4096"}
    proc = subprocess.run([str(inspect), "eval", TASKS.name, "--model", "mockllm/model", "--log-dir", str(log_dir),
                           "--log-format", "json", "--display", "plain", "--no-fail-on-error"],
                          capture_output=True, text=True, timeout=900, env=env, cwd=TASKS.parent)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = [json.loads(p.read_text()) for p in sorted(log_dir.glob("*.json"))]
    return {log["eval"]["task"].rpartition("/")[2]: log for log in found}


def _sample(log: dict[str, Any]) -> dict[str, Any]:
    assert log["status"] == "success", log.get("error")
    sample: dict[str, Any] = log["samples"][0]
    assert sample.get("error") is None, sample["error"]
    return sample


def test_the_provider_is_found_through_inspects_entry_point() -> None:
    assert registry_find_sandboxenv("harness") is HarnessSandboxEnvironment


def test_exec_read_and_write_keep_inspects_contract_in_the_sandbox(logs: dict[str, dict[str, Any]]) -> None:
    score = _sample(logs["probe"])["scores"]["all_checks_hold"]
    assert json.loads(score["explanation"]) == {}          # every check of inspect_tasks.EXPECTED held
    assert score["value"] == "C"


def test_inspects_bash_tool_runs_in_the_sandbox_as_its_user(logs: dict[str, dict[str, Any]]) -> None:
    sample = _sample(logs["bash_agent"])
    explanation = json.loads(sample["scores"]["file_written"]["explanation"])
    assert explanation["file"] == "hi\n"
    assert explanation["tool"] == ["hi\nagent\n"]
    assert sample["scores"]["file_written"]["value"] == "C"


def test_a_config_string_names_a_task_folder_or_a_project(tmp_path: Path) -> None:
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "task.json").write_text("{}")
    assert config_target(str(tmp_path / "task")).task == tmp_path / "task"
    assert config_target(str(tmp_path)).project == tmp_path
    assert config_target(HarnessSandboxConfig(image="x")).image == "x"
    swebench = HarnessSandboxConfig(instances="lite.jsonl", repos="repos")
    chosen = config_target(swebench, {"instance_id": "astropy__astropy-12907"})
    assert (chosen.instances, chosen.instance_id) == (Path("lite.jsonl"), "astropy__astropy-12907")
    with pytest.raises(HarnessError, match="instances and instance_id go together"):
        config_target(swebench, {})
    with pytest.raises(ValueError, match="extra_forbidden|Extra inputs"):
        HarnessSandboxEnvironment.config_deserialize({"imgae": "typo"})


def test_inspect_sandbox_cleanup_removes_one_sessions_sandbox(docker_client: Any, sandbox_image: str) -> None:
    opened = open_for_adapter(Target(kind="inspect"))
    session = {"label": f"harness.session={opened.session}"}
    try:
        assert len(docker_client.containers.list(all=True, filters=session)) == 1      # positive control
        anyio.run(HarnessSandboxEnvironment.cli_cleanup, opened.session)
        assert docker_client.containers.list(all=True, filters=session) == []
    finally:
        opened.close()
