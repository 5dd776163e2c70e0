"""Whole sessions on tasks/wordcount: real Docker sandbox, real tools, scripted models."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from harness.agent.session import run_session
from harness.agent.trajectory import load_trajectory
from harness.config import Config, LoopConfig, Secrets
from harness.core.task import Task, load_task
from harness.errors import HarnessError
from harness.models.scripted import ScriptedModel, resolve_script

REPO_ROOT = Path(__file__).resolve().parents[2]
TEST_LABELS = {"harness.test": "1"}
FIX = json.loads(resolve_script("wordcount-fix").read_text())["turns"]

pytestmark = pytest.mark.docker


@pytest.fixture
def task(sandbox_image: str) -> Task:
    return load_task(REPO_ROOT / "tasks" / "wordcount")


def _config(sandbox_image: str, **loop: object) -> Config:
    cfg = Config()
    return cfg.replace(sandbox=dataclasses.replace(cfg.sandbox, image=sandbox_image),
                       loop=dataclasses.replace(LoopConfig(), **loop))


def test_scripted_repair_passes_the_tests_and_writes_the_three_files(task: Task, sandbox_image: str,
                                                                     tmp_path: Path) -> None:
    secrets = Secrets(anthropic_api_key="sk-ant-never-written")
    outcome = run_session(task, ScriptedModel(FIX, name="scripted:wordcount-fix"), _config(sandbox_image), tmp_path,
                          secrets=secrets, labels=TEST_LABELS)
    assert (outcome.stop_reason, outcome.turns, outcome.tests_passed, outcome.attempts) == ("end", 5, True, 1)
    assert outcome.patch == (tmp_path / "patch.diff").read_text()
    assert "+    return ranked[:n]" in outcome.patch and "__pycache__" not in outcome.patch
    # the patch applies to the starting files with git, as graders will apply it
    work = tmp_path / "check"
    subprocess.run(["cp", "-r", str(task.repo_dir), str(work)], check=True)
    subprocess.run(["git", "apply", "--check", str(tmp_path / "patch.diff")], cwd=work, check=True)
    messages = load_trajectory(tmp_path / "trajectory.jsonl")
    assert [m.role for m in messages[:3]] == ["system", "user", "assistant"] and len(messages) == 11
    assert "passed" in messages[-2].tool_results[0].content
    result = json.loads((tmp_path / "result.json").read_text())
    assert (result["stop_reason"], result["tests_passed"], result["model"]) == ("end", True, "scripted:wordcount-fix")
    assert result["config"]["sandbox"]["image"] == sandbox_image and result["attempts"][0]["tests_exit_code"] == 0
    assert "sk-ant-never-written" not in (tmp_path / "result.json").read_text()
    assert "4 passed" in (tmp_path / "tests.txt").read_text()


def test_model_that_changes_nothing_leaves_an_empty_patch_and_failing_tests(task: Task, sandbox_image: str,
                                                                          tmp_path: Path) -> None:
    model = ScriptedModel([[{"type": "text", "text": "Looks fine to me."}]])
    outcome = run_session(task, model, _config(sandbox_image), tmp_path, labels=TEST_LABELS)
    assert (outcome.stop_reason, outcome.patch, outcome.tests_passed) == ("end", "", False)
    assert (tmp_path / "patch.diff").read_text() == ""


def test_reflexion_retries_from_the_original_files_with_test_output_and_self_critique(
        task: Task, sandbox_image: str, tmp_path: Path) -> None:
    half_fix = [FIX[1], [FIX[2][0], FIX[2][1]], [{"type": "text", "text": "Fixed the slice."}]]
    critique = "I fixed only the slice; the accented-letter test still fails, so the regex needs Unicode letters."
    model = ScriptedModel(half_fix + [[{"type": "text", "text": critique}]] + FIX)
    outcome = run_session(task, model, _config(sandbox_image, attempts=3), tmp_path, labels=TEST_LABELS)
    assert (outcome.attempts, outcome.tests_passed, outcome.stop_reason) == (2, True, "end")
    first = outcome.attempt_results[0]
    assert first.tests_passed is False and first.reflection == critique
    second_prompt = load_trajectory(tmp_path / "attempt-2" / "trajectory.jsonl")[1].text
    assert "This is attempt 2" in second_prompt and critique in second_prompt
    assert "test_count_words_accented_letters" in second_prompt          # the external signal, not the model's
    # the second attempt started from the original files: its patch holds both fixes, the first only one
    assert "ranked[:n]" in (tmp_path / "attempt-1" / "patch.diff").read_text()
    assert "[a-z]" not in (tmp_path / "attempt-1" / "patch.diff").read_text()
    assert (tmp_path / "patch.diff").read_text() == (tmp_path / "attempt-2" / "patch.diff").read_text()
    assert "+_WORD = re.compile" in outcome.patch and "+    return ranked[:n]" in outcome.patch
    result = json.loads((tmp_path / "result.json").read_text())
    assert [a["tests_passed"] for a in result["attempts"]] == [False, True]


def test_run_cut_by_the_cap_resumes_from_its_trajectory_in_a_new_sandbox(task: Task, sandbox_image: str,
                                                                        tmp_path: Path) -> None:
    first = run_session(task, ScriptedModel(FIX), _config(sandbox_image, max_turns=3), tmp_path / "a",
                        labels=TEST_LABELS)
    assert (first.stop_reason, first.turns) == ("cap", 3)
    assert first.tests_passed is True        # the edits were made; the agent had not said it was done
    resumed = run_session(task, ScriptedModel(FIX[3:]), _config(sandbox_image), tmp_path / "b",
                          resume_from=tmp_path / "a" / "trajectory.jsonl", labels=TEST_LABELS)
    assert (resumed.stop_reason, resumed.turns, resumed.tests_passed) == ("end", 5, True)
    assert resumed.patch == first.patch
    whole = load_trajectory(tmp_path / "b" / "trajectory.jsonl")
    assert len(whole) == 11 and whole[:8] == load_trajectory(tmp_path / "a" / "trajectory.jsonl")


def test_outbound_tools_are_in_the_session_and_denied_without_a_human(task: Task, sandbox_image: str,
                                                                       tmp_path: Path) -> None:
    cfg = _config(sandbox_image)
    cfg = cfg.replace(approval=dataclasses.replace(cfg.approval, mode="deny", state_dir=tmp_path / "state"))
    model = ScriptedModel([[{"type": "tool_use", "name": "http_request", "input": {"url": "https://example.com/"}}],
                           [{"type": "text", "text": "No network then."}]])
    outcome = run_session(task, model, cfg, tmp_path / "out", labels=TEST_LABELS)
    assert "http_request" in [t["name"] for t in outcome.attempt_results[0].tool_specs]
    result = load_trajectory(tmp_path / "out" / "trajectory.jsonl")[3].tool_results[0]
    assert result.is_error and "(http_request) was denied" in result.content
    assert outcome.stop_reason == "end"


def test_the_workspace_is_a_git_repository_of_the_starting_state_and_the_agents_git_use_leaves_the_patch_alone(
        task: Task, sandbox_image: str, tmp_path: Path) -> None:
    def bash(command: str) -> list[dict[str, object]]:
        return [{"type": "tool_use", "name": "bash", "input": {"command": command}}]

    turns = [bash("git status --porcelain; echo log=$(git log --oneline | wc -l); git remote | wc -l"),
             FIX[1], FIX[2],
             bash("git diff --stat; git commit -qam 'my fix' && git log --oneline | wc -l"),
             bash("git reset -q --soft HEAD~1 && git status --porcelain"),
             [{"type": "text", "text": "Done."}]]
    outcome = run_session(task, ScriptedModel(turns), _config(sandbox_image), tmp_path, labels=TEST_LABELS)
    results = [r.content for m in load_trajectory(tmp_path / "trajectory.jsonl") for r in m.tool_results]
    assert "log=1" in results[0] and "\n0\n" in results[0] + "\n"     # clean, one commit, no remote
    assert "wordcount/core.py | 4 ++--" in results[4] and "\n2" in results[4]
    assert "M  wordcount/core.py" in results[5]
    assert "+    return ranked[:n]" in outcome.patch and ".git" not in outcome.patch
    assert outcome.tests_passed is True


def _bash(command: str) -> list[dict[str, object]]:
    return [{"type": "tool_use", "name": "bash", "input": {"command": command}}]


TAMPER = "export GIT_DIR=/tmp/harness/git GIT_WORK_TREE=/workspace; "


def test_an_agent_that_rewrites_the_baseline_still_gets_the_patch_of_its_real_change(
        task: Task, sandbox_image: str, tmp_path: Path) -> None:
    hide = (TAMPER + "git add -A && git -c user.name=x -c user.email=y commit -qm hide && "
            "git config filter.hide.clean 'sed s/ranked/RANKED/' && echo '* filter=hide' > $GIT_DIR/info/attributes"
            " && mkdir -p $GIT_DIR/hooks && git diff --cached HEAD | wc -l")
    turns = [FIX[1], FIX[2], _bash(hide), [{"type": "text", "text": "Done."}]]
    outcome = run_session(task, ScriptedModel(turns), _config(sandbox_image), tmp_path, labels=TEST_LABELS)
    assert "+    return ranked[:n]" in outcome.patch and "RANKED" not in outcome.patch
    assert outcome.tests_passed is True


def test_an_agent_that_corrupts_the_baseline_gets_an_error_not_a_patch(task: Task, sandbox_image: str,
                                                                       tmp_path: Path) -> None:
    corrupt = (TAMPER + "blob=$(git rev-parse HEAD:wordcount/core.py); other=$(git rev-parse HEAD:tests/test_core.py);"
               " f=$GIT_DIR/objects/${blob:0:2}/${blob:2}; o=$GIT_DIR/objects/${other:0:2}/${other:2};"
               " chmod u+w $f && cp $o $f && echo swapped")
    turns = [_bash(corrupt), [{"type": "text", "text": "Done."}]]
    with pytest.raises(HarnessError, match="baseline of the starting files in the sandbox was altered"):
        run_session(task, ScriptedModel(turns), _config(sandbox_image), tmp_path, labels=TEST_LABELS)
