"""Host-side file work on hostile folders: harness.checks never writes through a link, and JSON files
a person may print carry no character that acts on a terminal."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from harness import checks
from harness.agent.trajectory import TrajectoryWriter, read_lines
from harness.errors import UnsafePathError
from harness.messages import user
from sandbox.text import safe_json

PRECIOUS = "precious\n"


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text(PRECIOUS)
    return victim


def test_a_hard_link_planted_at_an_output_path_is_refused_and_its_target_keeps_its_content(
        tmp_path: Path, outside: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    os.link(outside, out / "result.json")
    with pytest.raises(UnsafePathError, match=r"result.json: it is hard-linked \(2 names\)"):
        checks.write_file(out / "result.json", "{}")
    with pytest.raises(UnsafePathError, match="hard-linked"):
        os.close(checks.open_file(out / "result.json", append=True))
    with pytest.raises(UnsafePathError, match=r"result.json is a hard link"):
        checks.refuse_links(out)
    assert outside.read_text() == PRECIOUS

    (out / "result.json").unlink()                      # positive control: a file of its own
    checks.write_file(out / "result.json", "{}")
    checks.write_file(out / "result.json", "{\"a\": 1}")
    assert (out / "result.json").read_text() == "{\"a\": 1}"
    assert stat.S_IMODE((out / "result.json").stat().st_mode) == 0o600
    checks.refuse_links(out)


def test_a_record_is_replaced_whole_so_a_reader_never_sees_half_of_it(tmp_path: Path) -> None:
    # the web console reads result.json while a run writes it: the old content or the new, never a torn one
    checks.write_file(tmp_path / "result.json", '{"turns": 1}')
    with open(tmp_path / "result.json", "rb") as reader:        # a reader that opened the old record
        checks.write_file(tmp_path / "result.json", '{"turns": 2, "' + "x" * 100_000 + '": 0}')
        assert reader.read() == b'{"turns": 1}'                 # still whole (an in-place write had emptied it)
    assert json.loads((tmp_path / "result.json").read_text())["turns"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]     # no temporary file left


def test_a_symbolic_link_at_an_output_path_is_refused_for_writing_and_appending(
        tmp_path: Path, outside: Path) -> None:
    (tmp_path / "tests.txt").symlink_to(outside)
    for append in (False, True):
        with pytest.raises(UnsafePathError, match=r"tests.txt: it is a symbolic link \(to "):
            os.close(checks.open_file(tmp_path / "tests.txt", append=append))
    assert outside.read_text() == PRECIOUS


def test_a_fifo_at_an_output_path_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "patch.diff")
    with pytest.raises(UnsafePathError, match=r"patch.diff: it is not a regular file \(a fifo or socket\)"):
        checks.write_file(tmp_path / "patch.diff", "x")       # with no reader: would block forever
    reader = os.open(tmp_path / "patch.diff", os.O_RDONLY | os.O_NONBLOCK)
    try:                                                      # with a reader: opened, then refused
        with pytest.raises(UnsafePathError, match="patch.diff: it is not a regular file"):
            checks.write_file(tmp_path / "patch.diff", "x")
    finally:
        os.close(reader)


def test_json_files_keep_readable_text_but_escape_what_acts_on_a_terminal() -> None:
    value = {"text": "ok \x1b[2J\x1b]0;T\x07 \u009b31m \u202egnp.exe é 漢 😀", "n": 1}
    text = safe_json(value, indent=2)
    assert json.loads(text) == value                     # the same data once parsed
    assert "é 漢 😀" in text                              # positive control: readable UTF-8 stays
    for raw in ("\x1b", "\x07", "\u009b", "\u202e"):
        assert raw not in text
    assert "\\u001b[2J" in text and "\\u009b" in text and "\\u202e" in text
    assert json.loads(safe_json("\U000f0000")) == "\U000f0000"    # astral: a surrogate pair escape


def test_the_trajectory_file_holds_no_terminal_escape_from_the_model(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.jsonl"
    TrajectoryWriter(path).write(user("look \x1b]0;owned\x07 here \u202e"))
    raw = path.read_text(encoding="utf-8")
    assert "\x1b" not in raw and "\u202e" not in raw
    assert read_lines(path)[0]["content"][0]["text"] == "look \x1b]0;owned\x07 here \u202e"
