"""What the console reads and how its server refuses: folders found without following links, a
trajectory indexed as it grows (a torn last line waits for its end), long texts folded, refs that climb
or cross links refused, two evaluations compared, and the guard's answers over real HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.agent.trajectory import TrajectoryWriter
from harness.evaluation.report import InstanceRecord, instance_dir, write_done, write_outputs
from harness.messages import Message, TextBlock
from harness.outputs import record_output, recorded_outputs
from harness.web.records import NotFound
from harness.web.runs import FOLD_LINES, Roots, compare_view, fold, list_runs
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
