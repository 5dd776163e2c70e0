"""What the operator's terminal shows when the model or an input file carries escape sequences and rich
markup: the exact bytes the harness writes go through a terminal emulator (pyte), and the screen is
asserted as a human would see it. Each test also feeds the raw attack to the same emulator, showing
that it would clear the screen, set the window title and reverse text if it got through."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pyte
import pytest
from rich.console import Console

from harness.cli.main import main
from harness.cli.run_cmd import LiveProgress
from harness.core.task import load_task
from harness.evaluation.progress import LineEvents, LiveEvents, summary_table
from harness.evaluation.report import InstanceRecord
from sandbox.text import escape_ident

REPO_ROOT = Path(__file__).resolve().parents[2]
TASK = str(REPO_ROOT / "tasks" / "wordcount")
COLS, ROWS = 200, 150

CLEAR, TITLE, MARKUP = "\x1b[2J", "\x1b]0;T\x07", "[reverse]X[/reverse]"
ATTACK = f"bash{CLEAR}{TITLE}{MARKUP}"                    # a tool name that clears the screen, sets the title, styles
SHOWN = r"bash\x1b[2J\x1b]0;T\x07[reverse]X[/reverse]"     # what the operator must read instead
FAKE_LINE = "view\n  turn   9  write"                      # a tool name faking a progress line of its own


def screen_of(data: bytes | str, cols: int = COLS, rows: int = ROWS) -> pyte.Screen:
    """The screen after a terminal received `data` (str: as printed, newlines become CR LF as a tty does)."""
    if isinstance(data, str):
        data = data.replace("\n", "\r\n").encode()
    screen = pyte.Screen(cols, rows)
    pyte.ByteStream(screen).feed(data)
    return screen


def shown(screen: pyte.Screen) -> str:
    return "\n".join(line.rstrip() for line in screen.display)


def reversed_cells(screen: pyte.Screen) -> int:
    return sum(1 for row in screen.buffer.values() for cell in row.values() if cell.reverse)


def assert_attack_works_when_raw() -> None:
    """Positive control: the raw attack does act on this emulator."""
    screen = screen_of(f"a line before\n{ATTACK}\x1b[7mX\x1b[0m".encode())
    assert screen.title == "T"
    assert "a line before" not in shown(screen)        # cleared
    assert reversed_cells(screen) == 1


def assert_harmless(screen: pyte.Screen, *before: str) -> None:
    text = shown(screen)
    assert screen.title == "", f"the window title was set to {screen.title[:60]!r}"
    assert reversed_cells(screen) == 0
    for line in before:                                # printed before the attack, still on the screen
        assert line in text, f"{line!r} is gone from the screen (cleared?):\n{text}"


def run_in_terminal(args: list[str], env: dict[str, str], timeout: float = 600,
                    python: list[str] | None = None) -> tuple[int, bytes]:
    """`harness ARGS` (or `python PYTHON`) with stdin, stdout and stderr on a pseudo-terminal: its exit code
    and every byte it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    command = [sys.executable, *python] if python else [sys.executable, "-m", "harness.cli.main", *args]
    proc = subprocess.Popen(command, stdin=slave, stdout=slave,
                            stderr=slave, cwd=REPO_ROOT, env=env, start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:                            # EIO: every writer has closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            proc.wait()
        os.close(master)
    return code, b"".join(chunks)


@pytest.fixture
def terminal_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HARNESS_MODEL", "COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", HARNESS_STATE_DIR=str(tmp_path_factory.mktemp("state")))
    return env


def hostile_script(folder: Path) -> Path:
    """A scripted model whose file name, text and tool name carry the attack; a benign `bash` call as control.
    The file name holds no `/`, so its markup is an unclosed tag."""
    script = folder / f"s{TITLE}{CLEAR}[reverse]Y.json"
    turn = [{"type": "text", "text": f"thinking{TITLE}{CLEAR}{MARKUP}"},
            {"type": "tool_use", "name": "bash",
             "input": {"command": "printf 'out\\033]0;O\\007[reverse]Z[/reverse]\\n' | tee evil.txt"}},
            {"type": "tool_use", "name": ATTACK, "input": {"k": f"v{TITLE}"}},
            {"type": "tool_use", "name": FAKE_LINE, "input": {}}]
    script.write_text(json.dumps({"turns": [turn]}))   # one turn: the next call ends the run as an error
    return script


@pytest.mark.docker
def test_run_progress_shows_a_hostile_tool_name_model_name_and_stop_text_literally(
        tmp_path: Path, terminal_env: dict[str, str], sandbox_image: str) -> None:
    assert_attack_works_when_raw()
    script = hostile_script(tmp_path)
    code, data = run_in_terminal(["run", TASK, "--model", f"scripted:{script}", "--out", str(tmp_path / "out"),
                                  "--approve", "ask"], terminal_env)   # ask: no spinner redrawing (see below)
    screen = screen_of(data)
    text = shown(screen)
    assert code == 3, text                              # the script ran out: stopped as an error
    assert_harmless(screen, "starting a sandbox", "agent running")
    assert "  turn   1  bash " in text                  # control: a benign tool name shows as itself
    assert f"  turn   1  {SHOWN} (error)" in text
    assert r"  turn   1  view\x0a  turn   9  write (error)" in text   # one line, the newline shown
    assert "\n  turn   9" not in text
    assert r"s\x1b]0;T\x07\x1b[2J[reverse]Y.json" in text   # the model's name (its file) in the stop text
    assert "why it stopped: the scripted model" in text


def test_the_run_spinner_line_shows_a_hostile_model_name_and_tool_literally() -> None:
    # The spinner is a rich status redrawn from a thread; on a loaded machine its redraw timing varies,
    # so its line is checked here by rendering it, and the pty test above runs without it.
    task = load_task(Path(TASK))
    progress = LiveProgress(task, f"scripted:s{TITLE}{CLEAR}[reverse]Y.json", spinner=False)
    progress.tool = escape_ident(ATTACK)
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=COLS, color_system=None).print(progress)
    screen = screen_of(out.getvalue())
    assert_harmless(screen)
    text = shown(screen)
    assert r"scripted:s\x1b]0;T\x07\x1b[2J[reverse]Y.json · turn 0 · last tool " + SHOWN in text
    assert "[reverse]" in text and screen.title == ""


@pytest.mark.docker
def test_demo_shows_hostile_model_text_arguments_and_file_contents_literally(
        tmp_path: Path, terminal_env: dict[str, str], sandbox_image: str) -> None:
    assert_attack_works_when_raw()
    script = hostile_script(tmp_path)
    code, data = run_in_terminal(["demo", "--task", TASK, "--model", f"scripted:{script}",
                                  "--out", str(tmp_path / "out")], terminal_env)
    screen = screen_of(data)
    text = shown(screen)
    assert code == 3, text
    assert_harmless(screen, "demo: task wordcount", "--- what the agent did (trajectory.jsonl) ---")
    assert r"1. thinking\x1b]0;T\x07\x1b[2J[reverse]X[/reverse]" in text        # model text
    assert f"-> {SHOWN} " in text                                               # tool name
    assert r"+out\x1b]0;O\x07[reverse]Z[/reverse]" in text                      # file contents in the patch
    assert "+++ b/evil.txt" in text                                            # control: the patch is shown


@pytest.mark.docker
def test_eval_summary_shows_a_hostile_model_name_and_unknown_instance_id_literally(
        tmp_path: Path, terminal_env: dict[str, str], sandbox_image: str) -> None:
    assert_attack_works_when_raw()
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(row) + "\n" for row in [
        {"instance_id": "wordcount", "model_name_or_path": f"agent{TITLE}{CLEAR}{MARKUP}", "model_patch": ""},
        {"instance_id": "ghost-1", "model_name_or_path": "x", "model_patch": ""}]))
    code, data = run_in_terminal(["eval", TASK, "--predictions", str(preds), "--out", str(tmp_path / "out"),
                                  "--label", "harness.test=1"], terminal_env)
    screen = screen_of(data)
    text = shown(screen)
    assert code == 0, text
    assert_harmless(screen, "1 prediction(s) name no known instance")
    assert r"evaluation of agent\x1b]0;T\x07\x1b[2J[reverse]X[/reverse]" in text
    assert "ghost-1" in text and "wordcount" in text and "empty_patch" in text   # control: plain values shown


def test_the_error_printer_shows_a_hostile_instance_id_escaped(tmp_path: Path,
                                                               terminal_env: dict[str, str]) -> None:
    assert_attack_works_when_raw()
    instances = tmp_path / "instances.jsonl"
    row = {"repo": "o/n", "base_commit": "0123abc", "patch": "", "test_patch": "",
           "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
    instances.write_text(json.dumps({"instance_id": f"x{TITLE}{CLEAR}{MARKUP}", **row}) + "\n")
    (tmp_path / "repos").mkdir()
    code, data = run_in_terminal(["eval", "--instances", str(instances), "--repos", str(tmp_path / "repos"),
                                  "--predictions", "gold"], terminal_env, timeout=120)
    screen = screen_of(b"a line before\r\n" + data)
    assert code == 2, shown(screen)
    assert_harmless(screen, "a line before", "harness: error:")
    assert r"x\x1b]0;T\x07\x1b[2J[reverse]X[/reverse]" in shown(screen)
    # control: a plain id reaches the same printer and is shown as it is
    instances.write_text(json.dumps({"instance_id": "plain-1", **row}) + "\n")
    code, data = run_in_terminal(["eval", "--instances", str(instances), "--repos", str(tmp_path / "repos"),
                                  "--predictions", "gold"], terminal_env, timeout=120)
    assert code == 2 and "plain-1" in shown(screen_of(data))


def test_an_uncaught_exception_after_main_shows_its_message_escaped(terminal_env: dict[str, str]) -> None:
    raise_it = f"raise RuntimeError('bug: ' + {ATTACK!r})"
    # control: Python's own hook prints the message raw, and the attack acts
    code, data = run_in_terminal([], terminal_env, timeout=60, python=["-c", raise_it])
    assert code == 1 and screen_of(data).title == "T"
    code, data = run_in_terminal([], terminal_env, timeout=60, python=[
        "-c", f"from harness.cli.main import main\nmain(['tools'])\n{raise_it}"])
    screen = screen_of(data)
    assert code == 1
    assert_harmless(screen, "Traceback (most recent call last):", "tools (")
    assert f"RuntimeError: bug: {SHOWN}" in shown(screen)


def test_eval_progress_displays_show_hostile_ids_errors_and_messages_literally() -> None:
    assert_attack_works_when_raw()
    record = InstanceRecord(instance_id=f"i{TITLE}", status="error", model_name_or_path="m",
                            error=f"grading: SandboxError: {ATTACK}")
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=COLS, color_system="standard")
    events = LiveEvents(console)
    with events:
        events.begin(2, {}, 2)
        events.started(record.instance_id)
        events.stage(record.instance_id, f"Step 1: {ATTACK}")
        console.print(events._render())                 # what the live area draws
        events.message(f"build output: {ATTACK}")
        events.finished(record)
        events.message("plain message")                 # control
    screen = screen_of(out.getvalue().encode().replace(b"\n", b"\r\n"))
    text = shown(screen)
    assert_harmless(screen, "plain message")
    assert rf"i\x1b]0;T\x07: Step 1: {SHOWN}" in text
    assert f"build output: {SHOWN}" in text
    assert rf"i\x1b]0;T\x07: error in 0.0s (grading: SandboxError: {SHOWN})" in text

    lines = io.StringIO()
    plain = LineEvents(lines)
    plain.begin(1, {}, 1)
    plain.finished(record)
    plain.message(f"note {ATTACK}")
    screen = screen_of(lines.getvalue())
    assert_harmless(screen, "[1/1] ")
    assert rf"[1/1] i\x1b]0;T\x07: error (grading: SandboxError: {SHOWN})" in shown(screen)
    assert f"note {SHOWN}" in shown(screen)


def test_the_eval_summary_table_shows_hostile_ids_and_model_name_literally() -> None:
    row = {"status": "resolved", "duration": 1.0}
    report = {"model_name_or_path": ATTACK, "instances": {f"i{TITLE}{MARKUP}": row, "plain-1": row},
              **{k: 0 for k in ("submitted_instances", "completed_instances", "resolved_instances",
                                "unresolved_instances", "patch_failed_instances", "empty_patch_instances",
                                "error_instances", "incomplete_instances", "flaky_instances")}}
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=COLS).print(summary_table(report))
    screen = screen_of(out.getvalue().encode().replace(b"\n", b"\r\n"))
    assert_harmless(screen, "plain-1")                  # control: a plain id in its row
    assert rf"i\x1b]0;T\x07{MARKUP}" in shown(screen)
    assert f"evaluation of {SHOWN}" in shown(screen)


def test_tasks_check_shows_a_hostile_task_folder_name_literally(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    task = tmp_path / f"t{TITLE}{CLEAR}[reverse]W"      # a folder name cannot hold `/`: an unclosed tag
    task.mkdir()
    (task / "task.json").write_text(json.dumps({"id": "t1", "test_cmd": "true"}))
    code = main(["tasks", "check", str(task)])
    screen = screen_of("a line before\n" + capsys.readouterr().out)
    assert code == 2
    assert_harmless(screen, "a line before", "0 of 1 task(s) valid")   # control: the verdict line
    assert r"t\x1b]0;T\x07\x1b[2J[reverse]W: INVALID" in shown(screen)
