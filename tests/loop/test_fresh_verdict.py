"""`harness run`'s test verdict is taken in a fresh sandbox holding only the starting files and the patch.

Before, the tests ran in the agent's own sandbox after the patch was computed, so anything of the
agent's that was not in the patch could decide them: a process that took the restarted channel over
and planted a conftest.py once the patch was taken (issue 33, section 4: "tests pass" with an empty
patch), a plugin installed under ~/.local, a forged bytecode file in an excluded __pycache__. Each
case below also runs the tests in the agent's sandbox (the old verdict) as its positive control.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import pytest

from harness.agent.session import fresh_verdict, run_session, verdict_spec
from harness.agent.trajectory import load_trajectory
from harness.cli.main import main
from harness.config import Config, LoopConfig
from harness.core.task import Task, load_task
from harness.errors import HarnessError
from harness.models.scripted import ScriptedModel
from tests.sandbox.takeover import takeover_script

REPO_ROOT = Path(__file__).resolve().parents[2]
TASK = REPO_ROOT / "tasks" / "wordcount"
TEST_LABELS = {"harness.test": "1"}

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch, sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HARNESS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path_factory.mktemp("state")))


def _config(sandbox_image: str) -> Config:
    cfg = Config()
    return cfg.replace(sandbox=dataclasses.replace(cfg.sandbox, image=sandbox_image), loop=LoopConfig())


def _bash(command: str) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "name": "bash", "input": {"command": command}}]


def _observations(run: Path) -> list[str]:
    return [r.content for m in load_trajectory(run / "trajectory.jsonl") for r in m.tool_results]


def test_the_takeover_with_an_empty_patch_no_longer_passes_harness_run(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "takeover.json"
    script.write_text(json.dumps(takeover_script()))
    run = tmp_path / "run"
    code = main(["run", str(TASK), "--model", f"scripted:{script}", "--out", str(run)])
    out = capsys.readouterr().out
    assert "wordcount: tests FAIL" in out and code == 1, out        # before: "tests pass", exit 0
    assert (run / "patch.diff").read_text() == ""
    result = json.loads((run / "result.json").read_text())
    assert result["tests_passed"] is False and result["tests_where"].startswith("fresh sandbox verdict-")
    assert result["attempts"][0]["verdict"]["patch_applied"] is True
    tests = (run / "tests.txt").read_text()
    assert tests.startswith("# in a fresh sandbox (verdict-") and "3 failed, 1 passed" in tests
    killed, looked = _observations(run)
    assert "channel died" in killed and "it has been restarted" in killed
    assert "waits for the server" in looked and "patched" not in looked        # it never saw the new server
    assert "survivor.py" not in looked.split("PID COMMAND", 1)[1]              # nor outlived the restart


def test_a_legitimate_patch_passes_in_the_fresh_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(TASK), "--model", "scripted:wordcount-fix", "--out", str(tmp_path)]) == 0
    assert "wordcount: tests pass" in capsys.readouterr().out
    result = json.loads((tmp_path / "result.json").read_text())
    verdict = result["attempts"][0]["verdict"]
    assert (verdict["patch_applied"], verdict["passed"], verdict["exit_code"]) == (True, True, 0)
    assert verdict["sandbox"].startswith("verdict-") and verdict["sandbox"] != result["session"]
    assert "4 passed" in (tmp_path / "tests.txt").read_text()


# Makes every failing test pass when pytest loads it; where it is put differs by case.
PASS_ALL = ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    report = outcome.get_result()\n    if report.failed:\n"
            "        report.outcome = 'passed'\n")
# A bytecode file of the fixed module, stamped with the unchanged source's mtime and size: Python loads it
# instead of the source, and __pycache__ is not part of the patch.
FORGE_PYC = r'''
import importlib.util, marshal, os
path = "wordcount/core.py"
fixed = open(path).read().replace("ranked[: n - 1]", "ranked[:n]").replace('r"[a-z]+"', 'r"[^\\W\\d_]+"')
st = os.stat(path)
os.makedirs("wordcount/__pycache__", exist_ok=True)
with open(importlib.util.cache_from_source(path), "wb") as f:
    f.write(importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") + int(st.st_mtime).to_bytes(4, "little")
            + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little") + marshal.dumps(compile(fixed, path, "exec")))
'''
OUTSIDE_THE_PATCH = {
    "a plugin in the user's site-packages": (
        "site=$(python -m site --user-site) && mkdir -p $site && "
        f"cat > $site/passall.py <<'EOF'\n{PASS_ALL}EOF\n"
        "echo 'import os; os.environ.setdefault(\"PYTEST_PLUGINS\", \"passall\")' > $site/passall.pth"),
    "a forged bytecode file in __pycache__": f"python - <<'EOF'\n{FORGE_PYC.strip()}\nEOF",
}


@pytest.mark.parametrize("plant", list(OUTSIDE_THE_PATCH.values()), ids=list(OUTSIDE_THE_PATCH))
def test_what_is_not_in_the_patch_does_not_reach_the_verdict(plant: str, sandbox_image: str, tmp_path: Path) -> None:
    task: Task = load_task(TASK)
    model = ScriptedModel([_bash(plant), _bash("python -m pytest -rA -q"), [{"type": "text", "text": "done"}]])
    outcome = run_session(task, model, _config(sandbox_image), tmp_path, labels=TEST_LABELS)
    in_place = _observations(tmp_path)[1]
    assert "4 passed" in in_place, in_place              # the control: in the agent's sandbox, the tests pass
    assert outcome.patch == "" and outcome.tests_passed is False      # before: True, on an empty patch
    assert "3 failed, 1 passed" in (tmp_path / "tests.txt").read_text()


def test_a_patch_that_does_not_apply_fails_the_verdict_and_says_why(sandbox_image: str, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    task = dataclasses.replace(load_task(TASK), repo_dir=tmp_path / "other")    # not the files it was made on
    config = _config(sandbox_image)
    verdict = fresh_verdict(task, (TASK / "gold.patch").read_text(), config,
                            verdict_spec(task, config, sandbox_image, TEST_LABELS))
    assert (verdict.patch_applied, verdict.passed, verdict.tests) == (False, False, None)
    assert "the patch did not apply to the starting files" in verdict.record(task)
    assert "wordcount/core.py" in verdict.patch_output


def test_the_verdict_sandbox_started_ahead_is_removed_when_the_session_fails(
        sandbox_image: str, tmp_path: Path, docker_client: docker.DockerClient) -> None:
    case = {**TEST_LABELS, "harness.case": uuid.uuid4().hex}
    mine = {"label": f"harness.case={case['harness.case']}"}
    seen: set[str] = set()

    def watch(event: object) -> None:   # while the agent works, the verdict's sandbox comes up beside it
        deadline = time.monotonic() + 60
        while "verdict" not in seen and time.monotonic() < deadline and not isinstance(event, str):
            seen.update(c.labels["harness.kind"] for c in docker_client.containers.list(filters=mine))
            time.sleep(0.1)

    model = ScriptedModel([_bash("rm -rf /tmp/harness/git/objects/??"), [{"type": "text", "text": "done"}]])
    with pytest.raises(HarnessError, match="baseline of the starting files in the sandbox was altered"):
        run_session(load_task(TASK), model, _config(sandbox_image), tmp_path, labels=case, progress=watch)
    assert seen == {"session", "verdict"}
    assert docker_client.containers.list(all=True, filters=mine) == []       # both removed
