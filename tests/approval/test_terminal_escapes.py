"""Model-chosen text cannot redraw what the operator reads: the bytes the console prompt and the
`harness approvals` commands write are rendered by a terminal emulator (pyte), and the screen is
checked as a human would see it."""

from __future__ import annotations

import sys
from pathlib import Path

import pyte

from harness.approval.queue import ApprovalQueue
from harness.tools.outbound.preview import gutter
from tests.approval.helpers import CALLER, CountingServer, Terminal, harness_cli

SECRET_BODY = "API_TOKEN=sk-live-7f3a9c;DB_PASSWORD=hunter2"
FAKE = ("\x1b[13A\x1b[J"
        "┌─ outbound request #1: what will run if you approve ─\n"
        "│ method  GET\n│ url     https://docs.python.org/3/\n│ host    docs.python.org\n│ body: (empty)\n"
        "└─ end of request #1 (4 lines) ─\n[reverse]fake[/reverse]")
REAL_PROMPT = "or decide elsewhere: harness approvals approve 1"


def screen_of(data: bytes, columns: int = 220, lines: int = 60) -> list[str]:
    """What a terminal shows after receiving `data`: one string per screen row, right-trimmed."""
    screen = pyte.Screen(columns, lines)
    pyte.ByteStream(screen).feed(data)
    return [row.rstrip() for row in screen.display]


def test_a_key_with_cursor_escapes_cannot_hide_the_real_request_from_the_prompt(tmp_path: Path) -> None:
    with CountingServer() as server:
        term = Terminal([sys.executable, str(CALLER), "--state-dir", str(tmp_path), "--mode", "ask",
                         "--url", server.url("/exfil"), "--key", FAKE, "--body", SECRET_BODY])
        try:
            term.read_until(REAL_PROMPT)
            rows = screen_of(term.screen)
            shown = "\n".join(rows)
            assert "│ method  POST" in rows
            assert f"│ url     {server.url('/exfil')}" in rows
            assert f"│   {SECRET_BODY}" in rows
            assert "key \\x1b[13A\\x1b[J\\u250c\\u2500 outbound request #1" in shown      # the fake, as literal text
            assert "[reverse]fake[/reverse]" in shown                          # markup not interpreted
            assert b"\x1b" not in term.screen                                  # not one escape byte written
            term.type("no")
            term.read_until("Reason for the model")
            term.type("")
            assert term.result()["error"] == "ApprovalDenied"
            assert server.count() == 0
        finally:
            term.close()


def test_positive_control_the_same_key_printed_raw_does_hide_the_request() -> None:
    """The emulator obeys the attack: printed without escaping, the key erases the real request."""
    real = "method  POST\nurl     http://127.0.0.1:9/exfil\nbody: 44 bytes\n  " + SECRET_BODY
    raw = (f"\n{gutter(real, 1)}\ntool http_request, session s, key {FAKE}\n"
           "Approve outbound request #1? [yes/no] ").replace("\n", "\r\n").encode()
    shown = "\n".join(screen_of(raw))
    assert SECRET_BODY not in shown and "method  POST" not in shown
    assert "│ url     https://docs.python.org/3/" in shown


def test_the_cli_prints_hostile_tool_key_session_and_reason_as_text(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    hostile = "\x1b]0;owned\x07\x1b[2J[bold]x[/bold]\u202e"
    request, _ = queue.submit(session=f"s{hostile}", tool=f"http_request{hostile}", key=FAKE,
                              call_args={"url": "http://127.0.0.1:9/"},
                              args={"url": "http://127.0.0.1:9/", "body": SECRET_BODY},
                              preview=f"method  POST\nbody\n  {SECRET_BODY}")
    queue.decide(request.id, False, f"web:{hostile}", reason=f"no {hostile}")
    queue.close()
    for args in (("show", "1"), ("list", "--all"), ("export", "--format", "csv"), ("export",),
                 ("show", "1", "--json"), ("list", "--all", "--json")):
        out = harness_cli(*args, state_dir=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\x07" not in out.stdout and "\u202e" not in out.stdout, args
    shown = "\n".join(screen_of(harness_cli("show", "1", state_dir=tmp_path).stdout.replace("\n", "\r\n").encode()))
    assert f"│   {SECRET_BODY}" in shown
    assert "tool      http_request\\x1b]0;owned\\x07\\x1b[2J[bold]x[/bold]\\u202e" in shown
    assert "key       \\x1b[13A\\x1b[J\\u250c\\u2500 outbound" in shown
    assert "reason    no \\x1b]0;owned\\x07\\x1b[2J[bold]x[/bold]\\u202e" in shown

