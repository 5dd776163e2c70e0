"""The record files' types (harness.core.records): round trips, files written before versions, keys a
newer writer added, a wrong type named, SWE-bench's shapes kept, and a renamed field caught by mypy."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from harness.core import DoneRecord, EvalReport, EvalRun, InstanceReport, RecordError, RunSettings, SessionResult
from harness.evaluation.report import InstanceRecord, build_report, read_done, write_done, write_outputs
from harness.outputs import write_session_result

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_each_record_survives_a_round_trip_through_its_file_with_its_schema_version() -> None:
    records = [
        SessionResult(task="cart", model="gold", stop_reason="end", finished=True, turns=3,
                      usage={"input_tokens": 10, "output_tokens": 2}, cost_usd=0.25, tests_passed=True,
                      durations={"total": 1.5}, attempts=[{"number": 1}], config={"model": {"name": "x"}}),
        EvalRun(settings=RunSettings(model="gold", grade_runs=2, instances=["a", "b"]), options={"workers": 2}),
        DoneRecord(instance_id="a", status="resolved", model_name_or_path="gold", duration=2.0, flaky=False),
        InstanceReport(instance_id="a", patch_exists=True, patch_successfully_applied=True, resolved=True,
                       tests_status={"FAIL_TO_PASS": {}}, tests_rejected=None, runs=[{"resolved": True}],
                       flaky=False),
        build_report(["a", "b"], {"a": InstanceRecord("a", "resolved", "gold")}, "gold"),
    ]
    for record in records:
        text = json.dumps(record.to_dict())
        again = type(record).from_dict(json.loads(text), "record.json")
        assert again == record, type(record).__name__
    versions = {type(r).__name__: (r.to_dict().get("schema_version"), r.SCHEMA_VERSION) for r in records[:3]}
    assert versions == {"SessionResult": (1, 1), "EvalRun": (1, 1), "DoneRecord": (1, 1)}
    assert records[3].to_dict()["a"]["schema_version"] == 1 and records[4].to_dict()["schema_version"] == 2


def test_a_file_written_before_schema_versions_still_reads_and_missing_keys_take_defaults(tmp_path: Path) -> None:
    old_done = {"instance_id": "a", "status": "unresolved", "model_name_or_path": "m", "model_patch": "diff",
                "error": None, "duration": 3.0, "durations": {}, "turns": 2, "tokens": {}, "cost_usd": None,
                "stop_reason": "end", "flaky": False, "tests_resolved": False}     # before repo, python_*, versions
    folder = tmp_path / "instance"
    folder.mkdir()
    (folder / "done").write_text(json.dumps(old_done))
    record = read_done(folder)
    assert record is not None and (record.status, record.infra_retries, record.repo) == ("unresolved", 0, None)
    old_run = EvalRun.from_dict({"settings": {"model": "m", "instances": ["a"]}}, "run.json")
    assert (old_run.settings.model, old_run.settings.grade_runs, old_run.options) == ("m", None, {})
    result = SessionResult.from_dict({"task": "t"}, "result.json")
    assert (result.task, result.turns, result.usage, result.unknown) == ("t", None, {}, {})


def test_a_key_a_newer_writer_added_is_kept_and_written_back() -> None:
    newer = {"task": "t", "turns": 1, "sandbox_provider": {"type": "docker"}, "schema_version": 7}
    result = SessionResult.from_dict(newer, "result.json")
    assert result.unknown == {"sandbox_provider": {"type": "docker"}}
    assert result.to_dict()["sandbox_provider"] == {"type": "docker"}
    report = InstanceReport.from_dict({"x": {"resolved": True, "new_swebench_key": 1}}, "report.json")
    assert report.to_dict()["x"]["new_swebench_key"] == 1 and report.resolved


def test_a_wrong_type_is_an_error_naming_the_file_key_value_and_expected_type() -> None:
    with pytest.raises(RecordError) as caught:
        SessionResult.from_dict({"task": "t", "turns": "three"}, "runs/x/result.json")
    assert str(caught.value) == ("runs/x/result.json: key 'turns' holds 'three' (str); expected an integer or null")
    assert (caught.value.source, caught.value.key, caught.value.value) == ("runs/x/result.json", "turns", "three")
    with pytest.raises(RecordError, match=r"run.json: settings: key 'grade_runs' holds True \(bool\)"):
        EvalRun.from_dict({"settings": {"grade_runs": True}}, "run.json")
    with pytest.raises(RecordError, match=r"done: key 'status' holds 'finished' \(str\); expected one of 'resolved'"):
        DoneRecord.from_dict({"instance_id": "a", "status": "finished"}, "done")
    with pytest.raises(RecordError, match=r"report.json: key '\(the whole file\)' holds \[\] \(list\)"):
        EvalReport.from_dict([], "report.json")
    # control: the same values of the right types read, an int where a float is expected included
    assert DoneRecord.from_dict({"status": "resolved", "duration": 3}, "done").duration == 3


def test_a_viewer_reads_a_wrong_type_as_it_is_and_no_error() -> None:
    record = DoneRecord.from_dict({"status": "resolved state-running", "tests_resolved": "true x"}, "done",
                                  strict=False)
    assert (record.status, record.tests_resolved) == ("resolved state-running", "true x")
    assert EvalRun.from_dict({"settings": "torn"}, "run.json", strict=False).settings == RunSettings()


def test_a_done_marker_of_the_wrong_shape_is_not_taken_as_finished(tmp_path: Path) -> None:
    for body in ('{"instance_id": "a", "status": "resolved", "turns": "x"}', '{"instance_id": "a"}', "[1]"):
        (tmp_path / "done").write_text(body)
        assert read_done(tmp_path) is None, body
    write_done(tmp_path, InstanceRecord("a", "resolved", "m", repo="o/r"))      # control: a whole one is
    assert read_done(tmp_path) == InstanceRecord("a", "resolved", "m", repo="o/r")


def test_the_swebench_shapes_keep_their_keys(tmp_path: Path) -> None:
    entry = InstanceReport(instance_id="a", patch_exists=True, resolved=False).to_dict()["a"]
    assert list(entry) == ["patch_is_None", "patch_exists", "patch_successfully_applied", "resolved",
                           "patch_applied_with", "schema_version"]     # not graded: no test keys
    records = {"a": InstanceRecord("a", "resolved", "m"), "b": InstanceRecord("b", "error", "m", error="x")}
    written = write_outputs(tmp_path, ["a", "b", "c"], records, "m")
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk == written and EvalReport.from_dict(on_disk, "report.json") == build_report(
        ["a", "b", "c"], records, "m")
    swebench = {"total_instances", "submitted_instances", "completed_instances", "resolved_instances",
                "unresolved_instances", "empty_patch_instances", "error_instances", "completed_ids",
                "incomplete_ids", "empty_patch_ids", "submitted_ids", "resolved_ids", "unresolved_ids",
                "error_ids", "schema_version"}
    assert swebench <= set(on_disk) and on_disk["resolved_ids"] == ["a"] and on_disk["incomplete_ids"] == ["c"]


def test_report_json_carries_the_tests_verdict_of_each_empty_patch(tmp_path: Path) -> None:
    records = {"passes": InstanceRecord("passes", "empty_patch", "empty", tests_resolved=True),
               "fails": InstanceRecord("fails", "empty_patch", "empty", tests_resolved=False),
               "untested": InstanceRecord("untested", "error", "empty", error="x")}
    write_outputs(tmp_path, sorted(records), records, "empty")
    instances = json.loads((tmp_path / "report.json").read_text())["instances"]
    assert {i: instances[i]["tests_resolved"] for i in records} == {"passes": True, "fails": False, "untested": None}


def test_write_session_result_writes_the_record_with_its_version(tmp_path: Path) -> None:
    write_session_result(tmp_path / "result.json", SessionResult(task="t", turns=2))
    data = json.loads((tmp_path / "result.json").read_text())
    assert (data["task"], data["turns"], data["schema_version"]) == ("t", 2, 1)
    assert (tmp_path / "result.json").stat().st_mode & 0o777 == 0o600


def test_a_renamed_field_is_caught_by_mypy_not_at_run_time(tmp_path: Path) -> None:
    def check(body: str) -> tuple[str, int]:
        source = tmp_path / "reader.py"
        source.write_text(textwrap.dedent(f"""\
            from harness.core.records import SessionResult

            def tests_of(result: SessionResult) -> object:
                return {body}
            """))
        out, err, code = mypy_api.run(["--strict", "--no-incremental", "--follow-imports=silent",
                                       "--config-file", str(REPO_ROOT / "pyproject.toml"), str(source)])
        return out + err, code

    out, code = check("result.tests_pass")          # a reader still using a name the record no longer has
    assert code == 1 and '"SessionResult" has no attribute "tests_pass"' in out, out
    out, code = check("result.tests_passed")        # control: the field's name
    assert code == 0, out
