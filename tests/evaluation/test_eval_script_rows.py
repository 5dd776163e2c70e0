"""A real SWE-bench Lite row in SWE-bench 5.0's form (its own eval_script, log_parser, eval_type and image)
through `harness eval` as a researcher runs it, on its shipped source tarball: gold resolves and empty does
not, graded by the row's own script on the harness's offline environment image; run.json says which
dataset and split, and a resume that names another split is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.evaluation.conftest import SWEBENCH_DATA
from tests.evaluation.test_eval_scripts import _row, _write, as_five_row

ROW = "django__django-11099"
TEST_CMD = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 auth_tests.test_validators"

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _eval(rows: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli.main", "eval", "--instances", str(rows), "--repos",
                           str(SWEBENCH_DATA / "repos"), "--out", str(out), "--json", "--label", "harness.test=1",
                           *args], capture_output=True, text=True, timeout=3600)


def _report(out: Path, proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert (out / "report.json").is_file(), proc.stderr[-3000:]
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    assert report["error_ids"] == [] and report["unsupported_ids"] == [], report["instances"]
    return report


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    row = as_five_row(_row(ROW), TEST_CMD, ["tests/auth_tests/test_validators.py"], "parse_log_django", locale=True)
    return _write(tmp_path_factory.mktemp("rows"), row)


def test_gold_resolves_by_the_rows_own_script_and_run_json_names_the_dataset(rows: Path, tmp_path: Path) -> None:
    out = tmp_path / "gold"
    report = _report(out, _eval(rows, out, "--model", "gold", "--dataset", "SWE-bench/SWE-bench_Lite", "--split",
                                "test"))
    assert report["resolved_ids"] == [ROW], report["instances"]
    output = (out / "instances" / ROW / "test_output.txt").read_text()
    assert "the row names the image swebench/sweb.eval.x86_64.django_1776_django-11099:latest, which is not pulled" \
        in output
    assert "skipped `python -m pip install -e .`" in output and f"+ {TEST_CMD}" in output
    verdict = json.loads((out / "instances" / ROW / "report.json").read_text())[ROW]
    assert len(verdict["tests_status"]["FAIL_TO_PASS"]["success"]) == 3
    run = json.loads((out / "run.json").read_text())
    assert (run["dataset"], run["split"]) == ("SWE-bench/SWE-bench_Lite", "test")
    again = _eval(rows, out, "--model", "gold", "--resume", "--dataset", "SWE-bench/SWE-bench_Lite", "--split", "dev")
    assert again.returncode == 2
    assert f"--resume: {out} graded --split 'test', not 'dev'; resume with --split 'test'" in again.stderr


def test_empty_is_not_resolved_by_the_rows_own_script(rows: Path, tmp_path: Path) -> None:
    out = tmp_path / "empty"
    report = _report(out, _eval(rows, out, "--model", "empty"))
    assert report["resolved_ids"] == [] and report["empty_patch_ids"] == [ROW]
    verdict = json.loads((out / "instances" / ROW / "report.json").read_text())[ROW]
    assert verdict["tests_status"]["FAIL_TO_PASS"]["failure"] and verdict["tests_status"]["PASS_TO_PASS"]["success"]
    run = json.loads((out / "run.json").read_text())
    assert (run["dataset"], run["split"]) == (str(rows.resolve()), None)      # the file; no split is guessed
