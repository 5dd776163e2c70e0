"""Output reaches the model bounded in size and safe to show, however much or however odd it is."""

from __future__ import annotations

from harness.tools.shell.truncation import ERROR_PATTERN, Budget, format_observation
from sandbox.docker_sandbox import DockerSandbox

BUDGET = Budget(max_lines=200, max_bytes=16_000, error_lines=40)
MAX_OBSERVATION = 24_000     # the budget plus the status line, headers and notes


def test_a_flood_of_lines_stays_within_budget_and_keeps_head_tail_and_errors(shared_box: DockerSandbox) -> None:
    result = shared_box.exec("seq 1 1500000; echo 'ERROR: the one line that matters'; seq 1 1500009",
                             timeout=120, error_pattern=ERROR_PATTERN)
    assert result.stdout.total_lines == 3000010 and result.stdout.truncated
    assert len(result.stdout.head.encode()) <= 32768 and len(result.stdout.tail.encode()) <= 32768
    text = format_observation(result, BUDGET)
    assert len(text) < MAX_OBSERVATION
    assert text.splitlines()[0].startswith("[exit 0 · ")
    assert "stdout 20.8 MiB (3000010 lines) · stderr 0 B (0 lines)]" in text
    assert ("--- stdout: lines that look like errors (1 of 1 found in its first 16.0 MiB and its last lines) ---\n"
            "1500001: ERROR: the one line that matters") in text
    assert "--- stdout: lines 1-" in text and "\n1\n2\n3\n" in text and text.rstrip().endswith("\n1500009")
    assert "line(s) of stdout omitted; the first 8.0 MiB of it is saved at /tmp/harness/output/" in text


def test_one_huge_line_without_newlines_stays_within_budget(shared_box: DockerSandbox) -> None:
    result = shared_box.exec("head -c 50M /dev/zero | tr '\\0' a", timeout=120, error_pattern=ERROR_PATTERN)
    assert result.stdout.total_bytes == 50 * 1024 * 1024 and result.stdout.total_lines == 1
    text = format_observation(result, BUDGET)
    assert len(text) < MAX_OBSERVATION
    assert "characters of this line omitted" in text
    assert "stdout 50.0 MiB (1 line)" in text


def test_the_saved_output_can_be_paged_afterwards(shared_box: DockerSandbox) -> None:
    result = shared_box.exec("seq 1 100000", timeout=60)
    path = result.stdout.saved_path
    assert path is not None and path.startswith("/tmp/harness/output/")
    assert shared_box.exec(f"sed -n '50000p' {path}", timeout=10).stdout.text == "50000\n"
    small = shared_box.exec("seq 1 10", timeout=10)
    assert small.stdout.saved_path is None and not small.stdout.truncated   # small outputs are not saved


def test_invalid_utf8_nul_and_escape_sequences_are_made_visible_and_harmless(shared_box: DockerSandbox) -> None:
    result = shared_box.exec("printf 'bad \\xff\\xfe end\\n'; printf 'nul a\\0b\\n'; "
                             "printf '\\033[2J\\033[31mred\\033[0m\\n'; printf 'bell\\a cr\\rover\\n'; "
                             "printf 'bidi \\xe2\\x80\\xaeabc\\n'; printf 'caf\\xc3\\xa9 ok\\n'", timeout=10)
    out = result.stdout.text
    assert "bad \\xff\\xfe end" in out
    assert "nul a\\x00b" in out
    assert "\\x1b[2J\\x1b[31mred\\x1b[0m" in out
    assert "bell\\x07 cr\\x0dover" in out
    assert "bidi \\u202eabc" in out
    assert "café ok" in out                              # positive control: valid UTF-8 is untouched
    text = format_observation(result, BUDGET)
    assert not any(ch in text for ch in ("\x00", "\x1b", "\x07", "\r", "\u202e"))


def test_escapes_cut_in_the_middle_of_a_truncated_stream_stay_harmless(shared_box: DockerSandbox) -> None:
    result = shared_box.exec("for i in $(seq 1 20000); do printf '\\033[1mx\\xe2\\x80'; done", timeout=60)
    text = format_observation(result, BUDGET)
    assert result.stdout.truncated and len(text) < MAX_OBSERVATION
    assert "\x1b" not in text and "\\x1b[1mx" in text and "\\xe2\\x80" in text


def test_stderr_and_stdout_are_both_kept_and_labelled(shared_box: DockerSandbox) -> None:
    result = shared_box.exec("echo out; echo err >&2; exit 4", timeout=10)
    text = format_observation(result, BUDGET)
    assert text.splitlines()[0].startswith("[exit 4 · ")
    assert "--- stdout ---\nout" in text and "--- stderr ---\nerr" in text


def test_commands_still_run_when_the_agent_removes_the_output_folder(shared_box: DockerSandbox) -> None:
    shared_box.exec("rm -rf /tmp/harness/output && touch /tmp/harness/output", timeout=10)
    try:
        result = shared_box.exec("seq 1 100000", timeout=30)
        assert result.exit_code == 0 and result.stdout.total_lines == 100000
        assert result.stdout.saved_path is None
        assert "rerun with less output" in format_observation(result, BUDGET)
    finally:
        shared_box.exec("rm -f /tmp/harness/output", timeout=10)
    again = shared_box.exec("seq 1 100000", timeout=30)
    assert again.stdout.saved_path is not None                  # the folder is made again when it can be


def test_saving_output_never_follows_a_link_planted_at_the_next_path(shared_box: DockerSandbox) -> None:
    probe = shared_box.exec("seq 1 100000", timeout=30)
    assert probe.stdout.saved_path is not None
    number = int(probe.stdout.saved_path.rsplit("cmd-", 1)[1].split(".")[0])
    target = f"/tmp/harness/output/cmd-{number + 2}.stdout.txt"
    shared_box.exec(f"echo precious > /workspace/precious.txt && ln -sf /workspace/precious.txt {target}",
                    timeout=10)
    flood = shared_box.exec("seq 1 100000", timeout=30)
    assert flood.stdout.total_lines == 100000 and flood.stdout.saved_path is None
    assert shared_box.exec("cat /workspace/precious.txt", timeout=10).stdout.text == "precious\n"


def test_the_output_folder_is_there_from_the_first_command_and_made_again_after_removal(
        sandbox: DockerSandbox) -> None:
    # the folder is made by the server before the first command, no longer by a command of the start
    assert sandbox.exec("test -d /tmp/harness/output && ls -A /tmp/harness/output", timeout=10).stdout.text == ""
    sandbox.exec("rm -rf /tmp/harness", timeout=10)                     # after it was made once
    result = sandbox.exec("seq 1 100000", timeout=30)
    assert result.stdout.saved_path is not None                         # made again for the save
    assert sandbox.exec(f"wc -l < {result.stdout.saved_path}", timeout=10).stdout.text == "100000\n"
    assert sandbox.exec("seq 1 10", timeout=10).stdout.saved_path is None   # a small output still is not saved
