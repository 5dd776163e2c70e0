"""Real, unmodified SWE-bench Lite rows through the CLI: gold resolves, empty does not.

A django and a sympy instance from the shared SWE-bench Lite rows, with their shared source tarballs,
run by `harness eval` as a researcher runs it (real environment builds, real containers, the official
test commands and log parsers). The first run builds each environment (resolution, wheels, venv); later
runs reuse them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.evaluation.conftest import SWEBENCH_DATA

SHARED = SWEBENCH_DATA
ROWS = ("django__django-11099", "sympy__sympy-20590")

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [line for line in (SHARED / "lite-test.jsonl").read_text().splitlines()
            if line.strip() and json.loads(line)["instance_id"] in ROWS]
    assert len(rows) == len(ROWS)
    path = tmp_path_factory.mktemp("rows") / "rows.jsonl"
    path.write_text("\n".join(rows) + "\n")         # the published lines, byte for byte
    return path


def _eval(instances: Path, out: Path, model: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "eval", "--instances", str(instances),
                           "--repos", str(SHARED / "repos"), "--model", model, "--workers", "2", "--out", str(out),
                           "--json", "--label", "harness.test=1"], capture_output=True, text=True, timeout=3600)
    assert (out / "report.json").is_file(), proc.stderr[-3000:]
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    errors = {i: report["instances"][i]["error"] for i in report["error_ids"] + report["unsupported_ids"]}
    assert errors == {}, errors
    return report


def test_gold_resolves_a_real_django_and_sympy_instance(instances: Path, tmp_path: Path) -> None:
    report = _eval(instances, tmp_path / "gold", "gold")
    assert report["resolved_ids"] == sorted(ROWS), report["instances"]
    django = report["instances"]["django__django-11099"]
    assert (django["repo"], django["python_requested"], django["python_used"]) == ("django/django", "3.6", "3.9")
    assert set(report["repositories"]) == {"django/django", "sympy/sympy"}
    verdict = json.loads((tmp_path / "gold" / "instances" / "django__django-11099" / "report.json").read_text())
    tests = verdict["django__django-11099"]["tests_status"]
    assert tests["FAIL_TO_PASS"]["failure"] == [] and len(tests["FAIL_TO_PASS"]["success"]) == 3
    output = (tmp_path / "gold" / "instances" / "django__django-11099" / "test_output.txt").read_text()
    assert "auth_tests.test_validators" in output or "test_validators" in output    # runtests with labels


def test_empty_resolves_neither(instances: Path, tmp_path: Path) -> None:
    report = _eval(instances, tmp_path / "empty", "empty")
    assert report["resolved_ids"] == [] and report["empty_patch_ids"] == sorted(ROWS)
    for iid in ROWS:     # the tests ran and the FAIL_TO_PASS ones failed: the verdict is the tests', not a crash
        verdict = json.loads((tmp_path / "empty" / "instances" / iid / "report.json").read_text())[iid]
        assert verdict["tests_status"]["FAIL_TO_PASS"]["failure"], iid
        assert verdict["tests_status"]["PASS_TO_PASS"]["success"], iid
