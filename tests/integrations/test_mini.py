"""mini-swe-agent (the real package, harness[mini]) with every command in a real harness sandbox.

The model is mini's own deterministic test model; the agent, its config files and its CLI are mini's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("minisweagent", reason="the mini extra is not installed: pip install -e '.[mini]'")
import yaml  # noqa: E402
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.config import builtin_config_dir  # noqa: E402
from minisweagent.exceptions import Submitted  # noqa: E402
from minisweagent.models.test_models import DeterministicModel, make_output  # noqa: E402

from harness.core.task import load_task  # noqa: E402
from harness.errors import HarnessError  # noqa: E402
from harness.evaluation.instance_files import export_instances  # noqa: E402
from harness.integrations.mini import HarnessEnvironment  # noqa: E402

pytestmark = pytest.mark.docker
SWEBENCH_YAML = builtin_config_dir / "benchmarks" / "swebench.yaml"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mini") / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "core.py").write_text("def answer():\n    return 41\n")
    return root


@pytest.fixture(scope="module")
def env(project: Path, sandbox_image: str) -> Iterator[HarnessEnvironment]:
    with HarnessEnvironment(project=str(project), cwd="/testbed", timeout=20, env={"PAGER": "cat"}) as made:
        yield made


def test_a_command_runs_in_the_sandbox_at_testbed_with_env_and_stderr_merged(env: HarnessEnvironment) -> None:
    out = env.execute({"command": "pwd; echo pager=$PAGER; echo to-stderr >&2; cat pkg/core.py | head -1; exit 3"})
    assert out == {"output": "/workspace\npager=cat\nto-stderr\ndef answer():\n", "returncode": 3,
                   "exception_info": ""}
    # a cwd of mini's own, under /testbed, and a per-call env of the config
    assert env.execute({"command": "pwd"}, cwd="/testbed/pkg")["output"] == "/workspace/pkg\n"
    missing = env.execute({"command": "pwd"}, cwd="/testbed/nowhere")
    assert missing["returncode"] == 1 and "cd: /workspace/nowhere: No such file or directory" in missing["output"]


def test_the_sandbox_has_no_network_but_runs_python(env: HarnessEnvironment) -> None:
    probe = ("python -c \"import socket\ntry:\n socket.create_connection(('1.1.1.1', 53), timeout=3)\n"
             "except OSError as e:\n print('errno', e.errno)\"")
    out = env.execute({"command": probe})
    assert out["returncode"] == 0 and out["output"].strip() == "errno 101", out   # ENETUNREACH
    assert env.execute({"command": "python -c 'print(6*7)'"})["output"] == "42\n"   # positive control


def test_a_timed_out_command_is_killed_in_the_sandbox_with_its_children(env: HarnessEnvironment) -> None:
    control = env.execute({"command": "(sleep 0.2; touch /tmp/early) & wait; test -e /tmp/early && echo made"})
    assert control["output"] == "made\n"                   # the same probe, given the time, does its work
    started = time.monotonic()
    out = env.execute({"command": "echo begun; (sleep 3; touch /tmp/late) & sleep 30"}, timeout=1)
    assert time.monotonic() - started < 15
    assert out["returncode"] == -1 and out["output"].startswith("begun\n")
    assert out["extra"]["exception_type"] == "TimeoutExpired"
    assert "timed out after 1 seconds" in out["exception_info"]
    time.sleep(4)
    after = env.execute({"command": "test -e /tmp/late; echo late=$?; ps -eo comm= | grep -c '^sleep$'"})
    assert after["output"] == "late=1\n0\n"                # the background child died with the command


def test_the_submit_marker_ends_the_run_with_the_diff_as_submission(env: HarnessEnvironment) -> None:
    env.execute({"command": "sed -i 's/41/42/' pkg/core.py"})
    with pytest.raises(Submitted) as raised:
        env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"})
    submission = raised.value.messages[0]["extra"]["submission"]
    assert "-    return 41\n+    return 42\n" in submission
    assert env.patch() == submission
    # a failing command that prints the marker does not submit
    assert env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; false"})["returncode"] == 1


def test_long_output_is_cut_in_the_middle_and_says_where_the_rest_is(env: HarnessEnvironment) -> None:
    out = env.execute({"command": "seq 1 100000"})
    assert out["output"].startswith("1\n2\n") and out["output"].endswith("99999\n100000\n")
    assert "bytes of 588895 cut here" in out["output"] and "inside the sandbox" in out["output"]


def test_an_unknown_config_key_is_refused_with_the_known_ones() -> None:
    with pytest.raises(HarnessError, match=r"does not know the key\(s\) \['run_args'\].*known keys: .*'cwd'"):
        HarnessEnvironment(run_args=["--rm"])


def _outputs(steps: list[str]) -> list[dict[str, Any]]:
    return [make_output(f"step {n}\n```mswea_bash_command\n{cmd}\n```", [{"command": cmd}], cost=0.0)
            for n, cmd in enumerate(steps)]


STEPS = ["cat pkg/core.py", "sed -i 's/41/42/' pkg/core.py && python -c 'import pkg.core as c; print(c.answer())'",
         "git diff -- pkg/core.py > patch.txt", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt"]


def test_minis_default_agent_with_its_swebench_config_runs_end_to_end(project: Path, sandbox_image: str) -> None:
    config = yaml.safe_load(SWEBENCH_YAML.read_text())
    environment = {k: v for k, v in config["environment"].items() if k != "environment_class"}
    with HarnessEnvironment(**environment, project=str(project)) as env:
        agent = DefaultAgent(DeterministicModel(outputs=_outputs(STEPS)), env, **config["agent"])
        info = agent.run("make answer() return 42")
    assert info["exit_status"] == "Submitted"
    assert "+    return 42\n" in info["submission"]
    observations = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
    assert "<returncode>0</returncode>" in observations[1] and "42" in observations[1]
    assert "BASH_ENV" in config["environment"]["env"] and "BASH_ENV" not in env.config.env
    assert not [o for o in observations if "bashrc" in o]   # its unreadable BASH_ENV left no noise


def test_mini_extra_swebench_runs_unchanged_on_the_harness_environment(project: Path, tmp_path: Path,
                                                                       sandbox_image: str) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "test.jsonl").write_text(json.dumps({"instance_id": "demo__repo-1", "problem_statement": "answer 42",
                                                 "repo": "demo/repo", "base_commit": "0" * 40}) + "\n")
    ours = tmp_path / "harness.yaml"
    ours.write_text(yaml.safe_dump({
        "environment": {"environment_class": "harness.integrations.mini.HarnessEnvironment", "project": str(project)},
        "model": {"model_class": "deterministic", "model_name": "deterministic", "outputs": _outputs(STEPS)}}))
    out = tmp_path / "out"
    mini_extra = Path(sys.executable).with_name("mini-extra")
    proc = subprocess.run([str(mini_extra), "swebench", "--subset", str(data), "--split", "test", "-c",
                           str(SWEBENCH_YAML), "-c", str(ours), "-o", str(out), "--workers", "1"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MSWEA_SILENT_STARTUP": "1", "HF_DATASETS_OFFLINE": "1",
                               "MSWEA_CONFIGURED": "true"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    preds = json.loads((out / "preds.json").read_text())
    assert "+    return 42\n" in preds["demo__repo-1"]["model_patch"], preds
    traj = json.loads((out / "demo__repo-1" / "demo__repo-1.traj.json").read_text())
    assert traj["info"]["exit_status"] == "Submitted"
    assert traj["info"]["config"]["environment_type"] == "harness.integrations.mini.HarnessEnvironment"


def test_a_task_folder_runs_in_its_session_image_with_python_its_environment(sandbox_image: str) -> None:
    task = Path(__file__).resolve().parents[2] / "tasks" / "wordcount"
    with HarnessEnvironment(task=str(task), cwd="/testbed", timeout=120) as env:
        assert env.sandbox.image.startswith("harness-env:")     # its requirements installed
        out = env.execute({"command": "python -m pytest -q -p no:cacheprovider 2>&1 | tail -1"})
    assert out["returncode"] == 0 and " passed" in out["output"] and " failed" in out["output"], out


def test_an_instance_row_runs_in_its_environment_image_from_its_source(tmp_path: Path, sandbox_image: str) -> None:
    task = load_task(Path(__file__).resolve().parents[2] / "tasks" / "wordcount")
    export_instances([task], tmp_path / "instances.jsonl", tmp_path / "repos")   # as SWE-bench rows + tarballs
    with HarnessEnvironment(instances=str(tmp_path / "instances.jsonl"), instance_id="wordcount",
                            repos=str(tmp_path / "repos"), cwd="/testbed", timeout=120) as env:
        assert env.sandbox.task is not None and env.sandbox.task.id == "wordcount"
        assert env.sandbox.image.startswith("harness-env:")
        out = env.execute({"command": "git status --short; python -m pytest -q -p no:cacheprovider 2>&1 | tail -1"})
    assert out["returncode"] == 0 and " passed" in out["output"] and " failed" in out["output"], out
    assert out["output"].count("\n") == 1          # git status: nothing changed since the start
