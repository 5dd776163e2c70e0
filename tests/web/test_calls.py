"""The console's view of a third-party run's calls.jsonl (`harness.web.calls`): rows as the real gateway writes
them, totals whose cost is unknown as soon as one answered call has none, and a hostile file read within its caps,
each damaged line said in its own row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.gateway import Gateway
from harness.models.scripted import ScriptedModel
from harness.web import calls
from harness.web.calls import calls_view
from sandbox.loopback import HttpRequest
from tests.web.hostile_run import MARKUP

ASK = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


def _gateway_run(folder: Path, price: list[float] | None) -> None:
    """Two answered calls, a proxy request and a CONNECT refused, written by the real gateway."""
    model = ScriptedModel([{"content": [{"type": "text", "text": f"{MARKUP} reply"},
                                        {"type": "tool_use", "name": "bash", "input": {"command": "ls"}}],
                            "usage": {"input_tokens": 1000, "output_tokens": 100, "cache_read_tokens": 4000}},
                           {"content": [{"type": "text", "text": "done " * 200}], "usage": {"input_tokens": 10}}])
    gateway = Gateway(model, price=price, record=folder / "calls.jsonl")
    for method, target in (("POST", "/v1/chat/completions"), ("GET", f"http://pypi.org/{MARKUP}"),
                           ("CONNECT", "pypi.org:443"), ("POST", "/v1/chat/completions")):
        gateway.handle(HttpRequest(method, target, (), ASK if method == "POST" else b""))


def test_the_gateways_calls_show_with_their_figures_and_refusals(tmp_path: Path) -> None:
    _gateway_run(tmp_path, [3.0, 15.0, 0.3, 3.75])
    view = calls_view(tmp_path)
    assert view is not None and view["cut"] == []
    rows = view["calls"]
    assert [(r["method"], r["status"], r["outcome"]) for r in rows] == [
        ("POST", 200, "answered"), ("GET", 403, "refused"), ("CONNECT", 403, "refused"), ("POST", 200, "answered")]
    assert rows[0]["tokens"] == {"input_tokens": 1000, "output_tokens": 100, "cache_read_tokens": 4000,
                                 "cache_write_tokens": 0}
    assert rows[0]["cost_usd"] == pytest.approx((1000 * 3 + 100 * 15 + 4000 * 0.3) / 1e6)
    assert rows[0]["reply"].endswith("→ bash") and "\x1b" not in rows[0]["reply"] and "\\x1b" in rows[0]["reply"]
    assert rows[1]["route"].startswith("http://pypi.org/<script>") and "\u202e" not in rows[1]["route"]
    assert "the sandbox has no network" in rows[1]["error"] and rows[1]["outcome_class"] == "refused"
    assert rows[3]["reply"].endswith("(999 characters)")             # a long answer is cut in its row
    totals = view["totals"]
    assert (totals["requests"], totals["answered"], totals["refused"]) == (4, 2, 2)
    assert totals["tokens"]["cache_read_tokens"] == 4000
    assert totals["cost_usd"] == pytest.approx(rows[0]["cost_usd"] + rows[3]["cost_usd"])


def test_without_a_price_the_cost_is_unknown_never_zero(tmp_path: Path) -> None:
    _gateway_run(tmp_path, None)
    view = calls_view(tmp_path)
    assert view is not None
    assert [r["cost_usd"] for r in view["calls"]] == [None, None, None, None]
    assert view["totals"]["cost_usd"] is None and view["totals"]["answered"] == 2


def test_a_hostile_calls_file_is_read_within_its_caps_line_by_line(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calls, "LINE_CAP", 1000)
    monkeypatch.setattr(calls, "MAX_CALLS", 5)
    good = json.dumps({"method": "POST", "route": "/v1/chat/completions", "status": 200, "outcome": "answered",
                       "usage": {"input_tokens": 1}, "cost_usd": 0.5})
    lines = [good, "x" * 5000, "[1, 2]", "{not json", "[" * 100 + "]" * 100, json.dumps({"outcome": "class x"}),
             good]
    (tmp_path / "calls.jsonl").write_text("\n".join(lines) + "\n")
    view = calls_view(tmp_path)
    assert view is not None
    rows = view["calls"]
    assert len(rows) == 5 and rows[0]["outcome"] == "answered"
    assert "over the 1,000-byte cap" in rows[1]["damaged"]
    assert "expected an object" in rows[2]["damaged"] and "not JSON" in rows[3]["damaged"]
    assert "nested deeper than 64" in rows[4]["damaged"]
    assert "the rest is not shown" in view["cut"][0]
    assert (view["totals"]["answered"], view["totals"]["cost_usd"]) == (1, 0.5)       # the damaged rows count not

    (tmp_path / "calls.jsonl").unlink()
    (tmp_path / "calls.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    (tmp_path / "elsewhere.jsonl").write_text(good + "\n")
    refused = calls_view(tmp_path)
    assert refused is not None and "links are not followed" in refused["refused"] and refused["calls"] == []
    (tmp_path / "calls.jsonl").unlink()
    assert calls_view(tmp_path) is None                               # a run of our own loop has none


def test_an_outcome_names_a_css_class_only_through_the_fixed_table(tmp_path: Path) -> None:
    (tmp_path / "calls.jsonl").write_text(json.dumps({"outcome": "refused x\" onclick=\"y"}) + "\n")
    view = calls_view(tmp_path)
    assert view is not None and view["calls"][0]["outcome_class"] == "other"


def test_a_figure_that_is_not_a_number_reaches_the_page_as_none(tmp_path: Path) -> None:
    line = {"status": {"x": 1}, "seconds": "5", "cost_usd": "0.5", "usage": {"input_tokens": "9", "output_tokens": 2}}
    (tmp_path / "calls.jsonl").write_text(json.dumps(line) + "\n")
    view = calls_view(tmp_path)
    assert view is not None
    row = view["calls"][0]
    assert (row["status"], row["seconds"], row["cost_usd"]) == (None, None, None)
    assert row["tokens"]["input_tokens"] is None and row["tokens"]["output_tokens"] == 2
    assert view["totals"]["cost_usd"] is None and view["totals"]["tokens"]["output_tokens"] == 2
