"""Environment images: wheelhouse completeness for the target Python, sharing by content, the project
installed by install_cmd, and a build failure recorded as an infrastructure error of that task only."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

from harness.core.task import load_task
from harness.environments import env_hash
from harness.environments.recipe import INSTALL_FAILED
from harness.environments.wheelhouse import applicable, missing_dependencies
from harness.evaluation.instance_files import Prediction
from harness.evaluation.options import EvalOptions
from harness.evaluation.runner import run_evaluation

from .conftest import TASKS, TEST_LABELS


def _fake_wheel(folder: Path, name: str, requires: list[str]) -> None:
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{name}-1.0.dist-info/METADATA", meta + "\nlong description\nRequires-Dist: not-a-header\n")


def test_wheelhouse_completes_dependencies_by_the_target_pythons_markers(tmp_path):
    _fake_wheel(tmp_path, "pytest", ['tomli>=1; python_version < "3.11"', "iniconfig",
                                     'colorama; sys_platform == "win32"', 'hypothesis; extra == "dev"'])
    _fake_wheel(tmp_path, "iniconfig", [])
    assert missing_dependencies(tmp_path, "3.9") == ["tomli>=1"]
    assert missing_dependencies(tmp_path, "3.11") == []
    assert applicable(['backports.zoneinfo==0.2.1; python_version < "3.9"', "pytest==8.3.5"],
                      "3.11") == ["pytest==8.3.5"]


def test_equal_environments_share_an_image_and_the_project_counts_only_with_install_cmd():
    wordcount, cart, renewals = (load_task(TASKS / n) for n in ("wordcount", "cart", "renewals"))
    assert env_hash(wordcount, "base:1") == env_hash(cart, "base:1")
    assert env_hash(wordcount, "base:1") != env_hash(renewals, "base:1")
    assert env_hash(wordcount, "base:1") != env_hash(wordcount, "base:2")
    installed = [dataclasses.replace(t, install_cmd="pip install --no-deps -e .") for t in (wordcount, cart)]
    assert env_hash(installed[0], "base:1") != env_hash(installed[1], "base:1")


def _src_layout_task(root: Path, install_cmd: str) -> Path:
    """A project that imports only once installed (src/ layout)."""
    repo = root / "repo"
    (repo / "src" / "greet").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = '
                                         '"setuptools.build_meta"\n\n[project]\nname = "greet"\nversion = "0.1"\n')
    (repo / "src" / "greet" / "__init__.py").write_text('def hello(name):\n    return "Hello " + name\n')
    (repo / "tests" / "test_greet.py").write_text(
        "from greet import hello\n\n\ndef test_hello_has_punctuation():\n    assert hello('Ada') == 'Hello, Ada!'\n")
    (root / "problem.md").write_text("hello('Ada') should say 'Hello, Ada!'\n")
    (root / "gold.patch").write_text(
        "--- a/src/greet/__init__.py\n+++ b/src/greet/__init__.py\n@@ -1,2 +1,2 @@\n def hello(name):\n"
        '-    return "Hello " + name\n+    return "Hello, " + name + "!"\n')
    (root / "task.json").write_text(json.dumps({
        "id": root.name, "python": "3.11", "test_cmd": "python -m pytest -rA -q -p no:cacheprovider",
        "FAIL_TO_PASS": ["tests/test_greet.py::test_hello_has_punctuation"], "PASS_TO_PASS": [],
        "requirements": ["pytest==8.3.5"], "install_cmd": install_cmd}))
    return root


def test_install_cmd_installs_the_project_and_a_failed_build_is_an_infrastructure_error(
        tmp_path, docker_client, config_and_secrets):
    good = load_task(_src_layout_task(tmp_path / "greet", "pip install --no-deps -e ."))
    bad = load_task(_src_layout_task(tmp_path / "greet-broken", "echo 'cannot build this' >&2; exit 3"))
    tasks = [good, bad]
    config, secrets = config_and_secrets
    report = run_evaluation(tasks, EvalOptions(out_dir=tmp_path / "out", workers=2, labels=TEST_LABELS),
                            config, secrets, predictions={t.id: Prediction(t.id, "gold", t.gold_patch) for t in tasks})
    assert report.resolved_ids == ["greet"]
    assert report.error_ids == ["greet-broken"] and report.unresolved_ids == []
    error = report.instances["greet-broken"]["error"]
    # a task that installs its project gets a venv environment (shared by both: one lock) and an instance layer
    assert error.startswith("environment: EnvironmentBuildError: building harness-env:inst-")
    assert INSTALL_FAILED in error and "on harness-env:venv-" in error
    # the venv holds setuptools and wheel as the wheelhouse has them: pip's isolated build is left out
    assert "build isolation: off (the venv holds every build requirement" in error
    assert "cannot build this" in (tmp_path / "out" / "instances" / "greet-broken" / "error.txt").read_text()
