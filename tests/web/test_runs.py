"""What the console reads and how its server refuses: folders found without following links, a
trajectory indexed as it grows (a torn last line waits for its end), long texts folded, refs that climb
or cross links refused, two evaluations compared, and the guard's answers over real HTTP."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.agent.trajectory import TrajectoryWriter
from harness.core.records import EvalRun, RunSettings
from harness.evaluation.attempts import attempt_dir
from harness.evaluation.report import InstanceRecord, instance_dir, write_done, write_outputs
from harness.messages import Message, TextBlock
from harness.outputs import record_output, recorded_outputs
from harness.web.records import NotFound
from harness.web.runs import FOLD_LINES, Roots, compare_view, eval_view, fold, list_runs, run_view
from harness.web.server import make_web_server
from harness.web.steps import Trajectories, steps_view
from tests.web.hostile_run import MARKUP, write_hostile_run
from tests.web.signin import sign_in_cookie


def test_a_growing_trajectory_is_indexed_incrementally_and_a_torn_line_waits(tmp_path: Path) -> None:
    path = tmp_path / "run" / "trajectory.jsonl"
    writer = TrajectoryWriter(path)
    index = Trajectories()
    assert index.count(path) == 0
    writer.write(Message("user", (TextBlock("one"),)))
    assert index.count(path) == 1
    with path.open("a") as f:
        f.write('{"role": "assistant", "content": [{"type": "text", "text": "tw')     # a write in progress
    assert index.count(path) == 1
    with path.open("a") as f:
        f.write('o"}]}\n')
    assert index.count(path) == 2
    assert [json.loads(line.data)["content"][0]["text"] for line in index.lines(path, 0, 10)] == ["one", "two"]
    path.rename(tmp_path / "run" / "kept.jsonl")                                  # a resume moves it aside
    TrajectoryWriter(path).write(Message("user", (TextBlock("fresh"),)))
    assert [json.loads(line.data)["content"][0]["text"] for line in index.lines(path, 0, 10)] == ["fresh"]


def test_long_texts_are_folded_with_what_was_left_out_counted() -> None:
    head, tail = FOLD_LINES
    assert fold("a\nb") == {"chars": 3, "lines": 2, "text": "a\nb"}
    lines = [f"line {n}" for n in range(1000)]
    folded = fold("\n".join(lines))
    assert folded["head"] == "\n".join(lines[:head]) and folded["tail"] == "\n".join(lines[-tail:])
    assert folded["omitted_lines"] == 1000 - head - tail and "text" not in folded
    one_line = fold("x" * 1_000_000)
    assert one_line["omitted_chars"] == 1_000_000 - len(one_line["head"]) - len(one_line["tail"])


def test_runs_are_found_without_following_links_and_refs_cannot_climb(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    real = write_hostile_run(runs / "a" / "deep" / "run-1", steps=3)
    (runs / "link").symlink_to(real)
    (runs / "linked-parent").symlink_to(runs / "a")
    write_hostile_run(tmp_path / "outside", steps=1)
    roots = Roots([runs])
    assert [r["ref"] for r in list_runs(roots)] == ["0/a/deep/run-1"]
    row = list_runs(roots)[0]
    assert row["task"] == "task<script>window.pwned=1</script>" and row["state"] == "finished"
    for ref in ("0/../outside", "0//etc", "0/link", "0/linked-parent/deep/run-1", "1/x", "x/y", "0/nothing"):
        with pytest.raises(NotFound):
            roots.resolve(ref)


def test_steps_are_escaped_and_paged(tmp_path: Path) -> None:
    write_hostile_run(tmp_path / "runs" / "r", steps=250, big_output_bytes=300_000)
    view = steps_view(Roots([tmp_path / "runs"]), Trajectories(), "0/r", 0, 200)
    assert view["total"] == 2 + 2 * 250 + 1 and len(view["steps"]) == 200 and view["live"] is False
    text = json.dumps(view, ensure_ascii=False)
    assert "\u202e" not in text and "\x1b" not in text and "\\\\u202e" in text
    big = view["steps"][5]["blocks"][0]
    assert big["type"] == "tool_result" and big["omitted_lines"] > 2000 and big["details"]["exit_code"] == 1
    last = steps_view(Roots([tmp_path / "runs"]), Trajectories(), "0/r", 501, 200)["steps"]
    assert [s["role"] for s in last] == ["user", "invalid"] and "is not JSON" in last[1]["blocks"][0]["text"]
    assert MARKUP not in text


def _eval(out: Path, statuses: dict[str, str], repo: str = "django/django") -> None:
    records = {}
    for iid, status in statuses.items():
        record = InstanceRecord(iid, status, "m", model_patch="", repo=repo, duration=1.5)   # type: ignore[arg-type]
        instance_dir(out, iid).mkdir(parents=True)
        write_done(instance_dir(out, iid), record)
        records[iid] = record
    (out / "run.json").write_text(json.dumps({"model": "m"}))
    write_outputs(out, list(statuses), records, "m")


def test_two_evaluations_are_compared_instance_by_instance(tmp_path: Path) -> None:
    _eval(tmp_path / "a", {"django__django-11099": "resolved", "django__django-16139": "unresolved",
                           "astropy__astropy-12907": "error"})
    _eval(tmp_path / "b", {"django__django-11099": "unresolved", "django__django-16139": "resolved",
                           "astropy__astropy-12907": "error"})
    view = compare_view(Roots([tmp_path]), "0/a", "0/b")
    assert [(r["instance_id"], r["change"]) for r in view["rows"]] == [
        ("django__django-11099", "broken"), ("django__django-16139", "fixed"), ("astropy__astropy-12907", "same")]
    assert view["counts"] == {"broken": 1, "fixed": 1, "changed": 0, "same": 1}
    kinds = {r["ref"]: r["kind"] for r in list_runs(Roots([tmp_path]))}
    assert kinds == {"0/a": "eval", "0/b": "eval"}          # instance folders belong to their evaluation


def _epochs_eval(out: Path, outcomes: dict[str, list[str | None]], started_ago: float, done_at_start: int) -> None:
    """An evaluation of len(statuses) epochs as the runner leaves it: a `done` per finished attempt, run.json
    and (once an attempt finished) report.json and the predictions."""
    epochs = len(next(iter(outcomes.values())))
    records = {}
    for iid, statuses in outcomes.items():
        for epoch, status in enumerate(statuses, 1):
            folder = attempt_dir(out, iid, epoch)
            folder.mkdir(parents=True)
            if status is not None:
                record = InstanceRecord(iid, status, "m", model_patch="", duration=2.0, epoch=epoch)  # type: ignore[arg-type]
                write_done(folder, record)
                records[record.key] = record
    run = EvalRun(settings=RunSettings(model="m", instances=list(outcomes), epochs=epochs),
                  started_at=time.time() - started_ago, attempts_done_at_start=done_at_start)
    (out / "run.json").write_text(json.dumps(run.to_dict()))
    if records:
        write_outputs(out, list(outcomes), records, "m", epochs=epochs)


def test_a_running_evaluation_shows_done_of_total_resolved_so_far_and_an_eta_from_its_own_files(
        tmp_path: Path) -> None:
    _epochs_eval(tmp_path / "starting", {"a": [None, None, None], "b": [None, None, None]}, 5, 0)
    _epochs_eval(tmp_path / "going", {"a": ["resolved", None, None], "b": ["unresolved", None, None]}, 100, 0)
    _epochs_eval(tmp_path / "resumed", {"a": ["resolved", "resolved", None], "b": ["error", None, None]}, 100, 2)
    _epochs_eval(tmp_path / "stopped", {"a": ["resolved", None, None], "b": [None, None, None]}, 900, 0)
    _epochs_eval(tmp_path / "finished", {"a": ["resolved", "empty_patch", "resolved"], "b": ["unresolved"] * 3},
                 900, 0)
    old = time.time() - 600
    for path in (tmp_path / "stopped").rglob("*"):
        os.utime(path, (old, old))
    os.utime(tmp_path / "stopped", (old, old))
    rows = {r["name"]: r for r in list_runs(Roots([tmp_path]))}
    progress = {name: (r["state"], r["progress"]["done"], r["progress"]["total"], r["progress"]["resolved"],
                       r["progress"]["eta_seconds"]) for name, r in rows.items()}
    eta, resumed_eta = progress["going"][4], progress["resumed"][4]
    assert eta is not None and 199 <= eta <= 202                     # 4 attempts left, 2 done in 100 s
    assert resumed_eta is not None and 299 <= resumed_eta <= 303     # 3 left, this command did 1 (of 3) in 100 s
    assert progress == {"starting": ("running", 0, 6, 0, None), "going": ("running", 2, 6, 1, eta),
                        "resumed": ("running", 3, 6, 2, resumed_eta),
                        "stopped": ("incomplete", 1, 6, 1, None), "finished": ("finished", 6, 6, 2, None)}
    assert rows["starting"]["task"] == "0 of 6 attempts done" and rows["finished"]["task"] == "2 instances x 3 epochs"
    view = eval_view(Roots([tmp_path]), "0/finished")
    assert view["statistics"]["pass_at_1"] == pytest.approx(1 / 3, abs=1e-6)
    assert view["statistics"]["flipped_ids"] == ["a"] and view["epochs"] == 3
    row = next(r for r in view["instances"] if r["instance_id"] == "a")
    assert row["passes"] == "2/3" and row["run"] == "0/finished/instances/a/epoch-1"
    assert [(e["epoch"], e["status"], e["run"]) for e in row["epochs"]] == [
        (1, "resolved", "0/finished/instances/a/epoch-1"), (2, "empty_patch", "0/finished/instances/a/epoch-2"),
        (3, "resolved", "0/finished/instances/a/epoch-3")]
    assert run_view(Roots([tmp_path]), "0/finished/instances/a/epoch-2")["evaluation"] == "0/finished"


def test_hostile_progress_values_count_as_unknown_and_break_nothing(tmp_path: Path) -> None:
    out = tmp_path / "hostile"
    (out / "instances" / "x").mkdir(parents=True)
    (out / "run.json").write_text(json.dumps({"settings": {"instances": ["../../..", "x", 7], "epochs": "3"},
                                              "started_at": "yesterday", "attempts_done_at_start": True}))
    (out / "report.json").write_text(json.dumps({"attempts": {"attempts_done": -1, "attempts_resolved": "all",
                                                              "per_instance": {"x": {"statuses": "torn"}},
                                                              "pass_at_1": "<b>1</b>", "pass_at_k": [1]},
                                                 "epochs": {"n": 3}, "instances": {"x": {"status": "resolved"}}}))
    row = list_runs(Roots([tmp_path]))[0]
    assert row["state"] == "running" and row["progress"]["done"] is None and row["progress"]["total"] == 3
    assert row["progress"]["eta_seconds"] is None and row["progress"]["epochs"] == 1
    view = eval_view(Roots([tmp_path]), "0/hostile")
    assert view["statistics"]["pass_at_1"] == "<b>1</b>" and view["epochs"] == 1       # shown as text by the page
    assert view["instances"][0]["passes"] is None
    endless = tmp_path / "endless"                      # a trillion epochs: a few hundred folders looked at, no more
    (endless / "instances").mkdir(parents=True)
    (endless / "run.json").write_text(json.dumps({"settings": {"instances": ["x", "y"], "epochs": 10 ** 12}}))
    row = next(r for r in list_runs(Roots([tmp_path])) if r["name"] == "endless")
    assert row["progress"]["total"] == 2 * 10 ** 12 and row["state"] == "running"


def test_two_evaluations_of_several_epochs_are_compared_with_the_difference_and_its_interval(tmp_path: Path) -> None:
    _epochs_eval(tmp_path / "a", {"x": ["resolved", "unresolved"], "y": ["unresolved", "unresolved"],
                                  "z": ["error", "error"]}, 50, 0)
    _evaluated = {"x": ["resolved", "resolved"], "y": ["resolved", "unresolved"], "z": ["resolved", "resolved"]}
    _epochs_eval(tmp_path / "b", _evaluated, 50, 0)
    view = compare_view(Roots([tmp_path]), "0/a", "0/b")
    assert [(r["instance_id"], r["passes_a"], r["passes_b"], r["change"]) for r in view["rows"]] == [
        ("x", "1/2", "2/2", "fixed"), ("y", "0/2", "1/2", "fixed"), ("z", "0/0", "2/2", "fixed")]
    stats = view["statistics"]
    assert stats["paired_instances"] == 2 and stats["left_out"] == {"z": "no graded attempt in A"}
    assert stats["difference"] == 0.5 and stats["verdict"] == "no significant difference"


def _get(url: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def test_the_guard_refuses_before_any_route_and_every_answer_is_locked_down(tmp_path: Path) -> None:
    write_hostile_run(tmp_path / "runs" / "r", steps=2)
    with make_web_server(None, [tmp_path / "runs"], port=0, token="t0ken") as server:
        base = server.base
        status, headers, body = _get(base + "/api/runs")
        assert status == 401 and "not signed in" in body
        assert "script-src 'self'" in headers["content-security-policy"] and headers["x-frame-options"] == "DENY"
        assert _get(base + "/?token=wrong")[0] == 403
        cookie, session = sign_in_cookie(server.url)
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        signed = {"Cookie": session}
        status, headers, body = _get(base + "/api/runs", signed)
        assert status == 200 and json.loads(body)["runs"][0]["ref"] == "0/r"
        assert headers["cache-control"] == "no-store" and "server" not in {k.lower() for k in headers}
        assert _get(base + "/api/runs", {**signed, "Host": "evil.example"})[0] == 421
        assert _get(base + "/api/run?ref=0/../..", signed)[0] == 404
        status, _, body = _get(base + "/api/steps?ref=0/r&start=-1", signed)
        assert status == 400 and "'-1' is not a number; expected e.g. ?start=0" in body
        assert _get(base + "/api/run", signed)[0] == 400
        assert _get(base + "/api/state", signed)[0] == 404          # no approvals view on this server
        status, _, body = _get(base + "/api/decide", {**signed, "Origin": base, "Content-Type": "application/json"},
                               b"{}")
        assert status == 403 and "X-CSRF-Token" in body
        status, _, body = _get(base + "/static/../../etc/passwd", signed)
        assert status == 404
        assert _get(base + "/static/app.js")[0] == 200               # assets need no sign-in


def test_output_folders_are_recorded_once_and_only_real_folders_come_back(tmp_path: Path) -> None:
    state = tmp_path / "state"
    kept, gone, target = tmp_path / "a", tmp_path / "b", tmp_path / "target"
    for folder in (kept, gone, target):
        folder.mkdir()
    (tmp_path / "link").symlink_to(target)
    for folder in (kept, gone, kept, tmp_path / "link", Path("relative/x")):
        record_output(state, folder)
    gone.rmdir()
    assert recorded_outputs(state) == [kept.resolve(), target.resolve()]     # by last record, each once
    roots = Roots([tmp_path / "runs"], state)
    write_hostile_run(kept, steps=1)
    assert [r["ref"] for r in list_runs(roots)] == ["1"] and roots.paths[1] == kept.resolve()
    (state / "outputs.txt").unlink()
    (state / "outputs.txt").symlink_to(tmp_path / "elsewhere.txt")
    record_output(state, kept)                       # a link planted there is not written through
    assert not (tmp_path / "elsewhere.txt").exists()
