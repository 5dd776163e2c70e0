"""Hostile run folders against the console's one bounded reader (harness.web.records): every record
it reads that is damaged (nested 200,000 deep, over its size cap, not JSON, not UTF-8, a link, a fifo,
not an object) shows as that folder's damage, with why, while every other folder is listed; values
JSON allows that an answer cannot carry (NaN, 1e999, a 5,000-digit integer) are kept as text; and a
3 GiB trajectory line (sparse) is not read, said so, with the server's memory measured around it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.evaluation.report import InstanceRecord, write_done
from harness.web.records import DEPTH_CAP, LINE_CAP, RECORD_CAP, nesting
from harness.web.runs import MAX_ENTRIES, Roots, list_runs
from harness.web.server import make_web_server
from harness.web.steps import PAGE_BYTES, TRAJECTORY_CAP, Trajectories
from tests.web.hostile_run import write_hostile_run
from tests.web.signin import sign_in

REPO = Path(__file__).resolve().parents[2]
DEEP = b"[" * 200_000 + b"]" * 200_000


def _sparse(path: Path, size: int, head: bytes = b"", tail: bytes = b"") -> None:
    with path.open("wb") as f:
        f.write(head)
    os.truncate(path, size)
    with path.open("ab") as f:
        f.write(tail)


def _link(path: Path) -> None:
    target = path.parent / "elsewhere.json"
    target.write_text("{}")
    path.symlink_to(target)


DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "deep-lists": (lambda p: p.write_bytes(DEEP), f"nested deeper than {DEPTH_CAP} levels (at least 200000)"),
    "deep-objects": (lambda p: p.write_bytes(b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
                     f"nested deeper than {DEPTH_CAP} levels (at least 100000)"),
    "not-json": (lambda p: p.write_text('{"task": "t", '), "not JSON (Expecting property name"),
    "not-utf8": (lambda p: p.write_bytes(b'{"task": "\xff\xfe"}'), "not JSON ("),
    "over-cap": (lambda p: _sparse(p, RECORD_CAP + 10, b'{"task": "'), f"over the {RECORD_CAP:,}-byte cap"),
    "a-link": (_link, "links are not followed"),
    "a-fifo": (lambda p: os.mkfifo(p), "is not a regular file"),
    "not-object": (lambda p: p.write_text("[1, 2]"), "a JSON list, expected an object"),
}


def _damaged_folders(runs: Path) -> dict[str, tuple[str, str]]:
    """Run, instance and evaluation folders, each with one record damaged one way: ref -> (the record, why)."""
    expected = {}
    for shape, (damage, why) in DAMAGES.items():
        run = runs / f"run-{shape}"
        run.mkdir(parents=True)
        damage(run / "result.json")
        expected[f"0/run-{shape}"] = ("result.json", why)
        instance = runs / f"instance-{shape}"
        instance.mkdir()
        damage(instance / "done")
        expected[f"0/instance-{shape}"] = ("done", why)
        for record in ("report.json", "run.json"):
            evaluation = runs / f"eval-{record}-{shape}"
            (evaluation / "instances").mkdir(parents=True)
            (evaluation / ("run.json" if record == "report.json" else "report.json")).write_text("{}")
            damage(evaluation / record)
            expected[f"0/eval-{record}-{shape}"] = (record, why)
    return expected


def _get(url: str, headers: dict[str, str]) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_each_damaged_record_shows_as_its_folders_damage_and_every_other_folder_is_listed(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    expected = _damaged_folders(runs)
    write_hostile_run(runs / "good-run", steps=2)
    good_instance = runs / "good-instance"
    good_instance.mkdir()
    write_done(good_instance, InstanceRecord("good-instance", "resolved", "m", model_patch=""))
    inside = runs / "brackets-in-a-string"                    # control: 200,000 brackets inside a string are text
    inside.mkdir()
    (inside / "result.json").write_text(json.dumps({"task": "[" * 200_000, "stop_reason": "end"}))
    (runs / "deep-last-step").mkdir()                         # a run going on: its last line is read for its turn
    (runs / "deep-last-step" / "trajectory.jsonl").write_bytes(b"[" * 100_000 + b"\n")
    with make_web_server(None, [runs], port=0) as server:
        headers = sign_in(server.url)
        status, answer = _get(server.base + "/api/runs", headers)
        assert status == 200, answer                          # before: 500, and the whole list gone
        rows = {r["ref"]: r for r in answer["runs"]}
        assert set(rows) == set(expected) | {"0/good-run", "0/good-instance", "0/brackets-in-a-string",
                                             "0/deep-last-step"}
        assert rows["0/deep-last-step"]["state"] == "running"
        for ref, (record, why) in expected.items():
            assert rows[ref]["state"] == "damaged" and rows[ref]["state_class"] == "damaged", rows[ref]
            said = rows[ref]["damaged"]
            assert said.startswith(f"{record}: ") and why in said, (ref, said)
        assert rows["0/good-run"]["state"] == "finished" and "damaged" not in rows["0/good-run"]
        assert rows["0/good-instance"]["status"] == "resolved" and rows["0/good-instance"]["state"] == "finished"
        assert rows["0/brackets-in-a-string"]["state"] == "finished"
        for ref in ("0/run-deep-lists", "0/instance-not-json"):                  # a damaged run's own view answers
            status, view = _get(server.base + f"/api/run?ref={ref}", headers)
            assert status == 200 and view["result"] is None and view["summary"]["state"] == "damaged"
        status, view = _get(server.base + "/api/eval?ref=0/eval-report.json-deep-lists", headers)
        assert status == 200 and view["instances"] == [] and "nested deeper" in view["summary"]["damaged"]


def test_values_an_answer_cannot_carry_are_kept_as_text(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "odd-numbers"
    run.mkdir(parents=True)
    (run / "result.json").write_bytes(b'{"task": "t", "cost_usd": NaN, "turns": 1e999, '
                                      b'"durations": {"total": -Infinity}, "usage": {"input_tokens": '
                                      + b"9" * 5000 + b"}}")
    with make_web_server(None, [tmp_path / "runs"], port=0) as server:
        status, answer = _get(server.base + "/api/runs", sign_in(server.url))
    assert status == 200, answer                      # JSON answers carry no NaN: before, a 500 for the whole list
    row = answer["runs"][0]
    assert (row["cost_usd"], row["turns"], row["seconds"]) == ("NaN", "1e999", "-Infinity")
    assert row["tokens"]["input"] == "9" * 5000 and row["state"] == "finished"


def test_the_depth_scan_counts_brackets_outside_strings_only() -> None:
    assert nesting(b"[]") == 1 and nesting(b'{"a": [[1], {"b": []}]}') <= DEPTH_CAP
    assert nesting(b"[" * 65 + b"]" * 65) == 65
    assert nesting(b'["' + b"[" * 100 + b'"]') == 1                      # inside a string: not structure
    assert nesting(b'["\\"' + b"[" * 100 + b'"]') == 1                   # an escaped quote does not end it
    assert nesting(b'[' * 70 + b'"\\\\"' + b"]" * 70) == 70              # an escaped backslash does


@pytest.fixture
def web_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    """`harness web --port 0` in its own process: (the process, the printed URL, its ./runs)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    env = {**os.environ, "HARNESS_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli.main", "web", "--port", "0"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        match = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", line)
        assert match, f"harness web printed {line!r}"
        yield proc, match.group(0), runs
    finally:
        proc.terminate()
        proc.wait(10)


def _memory_kb(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    return {k: int(v) for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M)}


def test_a_3_gib_trajectory_line_is_not_read_said_so_and_the_servers_memory_stays_bounded(
        web_process: tuple[subprocess.Popen[str], str, Path]) -> None:
    proc, url, runs = web_process
    giant = runs / "giant"
    giant.mkdir()
    path = giant / "trajectory.jsonl"
    first = b'{"role": "user", "content": "before the giant line"}\n'
    _sparse(path, len(first) + 3 * 2**30, first + b'{"role": "assistant", "content": "' + b"x" * 8000,
            b'"}\n{"role": "user", "content": "after it"}\n')
    assert path.stat().st_blocks * 512 < 1_000_000                     # sparse: a few KB on disk
    small = write_hostile_run(runs / "small", steps=2, big_output_bytes=1000)
    cut_line = small / "trajectory.jsonl"                              # a real line over the cap, within the index
    long_line = b'{"role": "user", "content": "' + b"y" * (LINE_CAP + 10) + b'"}'
    with cut_line.open("ab") as f:
        f.write(b"\n" + long_line + b"\n")
    headers = sign_in(url)
    base = url.split("/?")[0]
    before = _memory_kb(proc.pid)
    status, steps = _get(base + "/api/steps?ref=0/giant&start=0&limit=200", headers)
    assert status == 200, steps
    assert steps["total"] == 1 and steps["steps"][0]["blocks"][0]["text"] == "before the giant line"
    assert any(f"its first {TRAJECTORY_CAP:,}" in c for c in steps["cut"]), steps["cut"]
    assert any(f"line 2 (from byte {len(first)}) is over the {LINE_CAP:,}-byte cap" in c for c in steps["cut"])
    assert _get(base + "/api/runs", headers)[0] == 200
    assert _get(base + "/api/run?ref=0/giant", headers)[0] == 200
    status, small_steps = _get(base + "/api/steps?ref=0/small&start=0&limit=1000", headers)
    cut = [s for s in small_steps["steps"] if s.get("cut")]
    assert len(cut) == 1 and f"is {len(long_line):,} bytes, over the {LINE_CAP:,}-byte cap" in cut[0]["cut"]
    status, block = _get(base + f"/api/block?ref=0/small&line={cut[0]['index']}&block=0", headers)
    assert status == 404 and "over the" in block
    time.sleep(0.2)
    after = _memory_kb(proc.pid)
    grew_mb = (after["VmHWM"] - before["VmHWM"]) / 1024
    print(f"server memory: peak {before['VmHWM'] / 1024:.0f} MB before, {after['VmHWM'] / 1024:.0f} MB after "
          f"reading a 3 GiB line (+{grew_mb:.0f} MB)")
    assert grew_mb < 200, (before, after)           # before the bound: +6,300 MB (the line, read and decoded)


def test_values_read_from_a_folder_name_no_css_class_of_their_own(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    hostile = runs / "hostile-instance"
    hostile.mkdir(parents=True)
    (hostile / "done").write_text(json.dumps({"instance_id": "x", "status": "resolved state-running",
                                              "tests_resolved": "true x"}))
    (hostile / "trajectory.jsonl").write_text(json.dumps({"role": "assistant role-system", "content": "a"}) + "\n"
                                              + json.dumps({"role": "assistant", "content": "b"}) + "\n")
    known = runs / "known-instance"                                     # control: known values keep their class
    known.mkdir()
    (known / "done").write_text(json.dumps({"instance_id": "y", "status": "resolved", "tests_resolved": True}))
    with make_web_server(None, [runs], port=0) as server:
        headers = sign_in(server.url)
        rows = {r["name"]: r for r in _get(server.base + "/api/runs", headers)[1]["runs"]}
        steps = _get(server.base + "/api/steps?ref=0/hostile-instance&start=0", headers)[1]["steps"]
    assert (rows["hostile-instance"]["status_class"], rows["hostile-instance"]["tests_class"]) == ("other", "other")
    assert rows["hostile-instance"]["status"] == "resolved state-running"          # shown as text, as ever
    assert (rows["known-instance"]["status_class"], rows["known-instance"]["tests_class"]) == ("resolved", "true")
    assert [s["role_class"] for s in steps] == ["other", "assistant"]


def test_a_folder_of_more_entries_than_the_cap_is_looked_at_up_to_it_and_said(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    crowded = runs / "crowded"
    crowded.mkdir(parents=True)
    for n in range(501):
        (crowded / f"f{n}").touch()
    write_hostile_run(runs / "good", steps=1)
    cut: list[str] = []
    assert [r["ref"] for r in list_runs(Roots([runs], max_entries=500), cut)] == ["0/good"]
    assert cut == [f"{crowded} holds more than 500 entries: 500 of them are looked at"]
    assert MAX_ENTRIES == 100_000
    with make_web_server(None, [runs], port=0) as server:         # the default cap: nothing cut, said as such
        status, answer = _get(server.base + "/api/runs", sign_in(server.url))
    assert status == 200 and answer["cut"] == [] and [r["ref"] for r in answer["runs"]] == ["0/good"]


def test_a_page_of_long_lines_reads_at_most_its_byte_budget_and_goes_on_from_there(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "long" / "trajectory.jsonl"
    path.parent.mkdir(parents=True)
    line = json.dumps({"role": "user", "content": "z" * 3_900_000}).encode()
    path.write_bytes((line + b"\n") * 6)
    index = Trajectories()
    first = index.lines(path, 0, 200)
    assert [x.number for x in first] == [0, 1, 2, 3] and sum(len(x.data) for x in first) <= PAGE_BYTES
    assert [x.number for x in index.lines(path, 4, 200)] == [4, 5]          # the page asks on from where it ended
    assert all(x.data == line and not x.cut for x in first)
