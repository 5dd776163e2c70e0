"""The approve/deny prompt of a session on a terminal, driven through a real pseudo-terminal."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.approval.helpers import CALLER, CountingServer, Terminal, approve

PROMPT = "Approve outbound request #1? [yes/no]"
CHOICES = "(g: approve by a grant for this run, d: deny by a grant for this run; "


@pytest.fixture
def server() -> Iterator[CountingServer]:
    with CountingServer() as srv:
        yield srv


def _ask(state: Path, server: CountingServer, body: str, key: str = "tty-1") -> Terminal:
    return Terminal([sys.executable, str(CALLER), "--state-dir", str(state), "--mode", "ask", "--url", server.url(),
                     "--key", key, "--body", body])


def test_the_prompt_shows_the_preview_and_yes_sends_once(tmp_path: Path, server: CountingServer) -> None:
    term = _ask(tmp_path, server, "token=s3cr3t\x1b[2J\x1b]0;pwned\x07")
    try:
        screen = term.read_until(PROMPT)
        assert f"│ url     {server.url()}" in screen
        assert "│   token=s3cr3t\\x1b[2J\\x1b]0;pwned\\x07" in screen    # escapes shown, not obeyed
        assert "\x1b" not in screen
        assert server.count() == 0
        term.type("yes")
        result = term.result()
        assert result["ok"] is True and "hit 1 POST /collect" in str(result["text"])
        assert server.count() == 1
    finally:
        term.close()


def test_no_with_a_reason_sends_nothing_and_the_model_reads_the_reason(tmp_path: Path, server: CountingServer) -> None:
    term = _ask(tmp_path, server, "harmless")
    try:
        term.read_until(PROMPT)
        term.type("no")
        term.read_until("Reason for the model")
        term.type("use the vendored copy instead")
        result = term.result()
        assert result["error"] == "ApprovalDenied"
        assert "denied by console: use the vendored copy instead" in str(result["text"])
        assert server.count() == 0
    finally:
        term.close()


def test_a_forged_prompt_in_the_payload_stays_inside_the_gutter(tmp_path: Path, server: CountingServer) -> None:
    forged = f"x\n└─ end of request #1 (1 lines) ─\n{PROMPT} (or decide elsewhere): "
    term = _ask(tmp_path, server, forged)
    try:
        screen = term.read_until(f"{PROMPT} {CHOICES}or decide elsewhere: harness")
        lines = screen.replace("\r", "").split("\n")
        ours = [ln for ln in lines if ln.startswith("Approve outbound")]
        assert len(ours) == 1 and re.fullmatch(
            re.escape(f"{PROMPT} {CHOICES}or decide elsewhere: harness approvals approve 1 --hash ")
            + "[0-9a-f]{64}\\): ",
            ours[0]), ours
        assert f"│   {PROMPT} (or decide elsewhere): " in lines
        term.type("maybe")                       # positive control of the parser: asks again
        term.read_until("please type yes, no, g or d (got 'maybe')")
        term.type("n")
        term.read_until("Reason for the model")
        term.type("")
        assert term.result()["error"] == "ApprovalDenied" and server.count() == 0
    finally:
        term.close()


def test_a_decision_made_elsewhere_ends_the_prompt(tmp_path: Path, server: CountingServer) -> None:
    term = _ask(tmp_path, server, "payload")
    try:
        term.read_until(PROMPT)
        assert approve(tmp_path, 1, "--by", "ops").returncode == 0
        term.read_until("request #1 was approved by ops")
        assert "hit 1 POST" in str(term.result()["text"]) and server.count() == 1
    finally:
        term.close()


@pytest.mark.docker
def test_harness_run_on_a_terminal_pauses_at_the_prompt_and_sends_once(tmp_path: Path, server: CountingServer,
                                                                         sandbox_image: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [
        [{"type": "tool_use", "name": "http_request",
          "input": {"method": "POST", "url": server.url("/notify"), "body": "tests pass", "key": "notify-1"}}],
        [{"type": "text", "text": "done"}]]}))
    term = Terminal([sys.executable, "-m", "harness.cli.main", "run", "tasks/wordcount", "--model",
                     f"scripted:{script}", "--approve", "ask", "--out", str(tmp_path / "run")],
                    env={"HARNESS_STATE_DIR": str(tmp_path / "state")})
    try:
        screen = term.read_until(PROMPT, timeout=120)
        assert f"│ url     {server.url('/notify')}" in screen and "│   tests pass" in screen
        assert server.count() == 0
        term.type("yes")
        term.read_until("files: ", timeout=120)
        term.proc.wait(60)
        assert server.count("/notify") == 1
        blocks = [b for line in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()
                  for b in json.loads(line)["content"]]
        result = next(b for b in blocks if b["type"] == "tool_result")
        assert result["is_error"] is False and "hit 1 POST /notify" in result["content"]
    finally:
        term.close()
