"""Every command runs as `bash -c COMMAND` would, whether or not a bash was started ahead for it."""

from __future__ import annotations

import time

from sandbox.docker_sandbox import DockerSandbox


def test_each_command_starts_fresh_with_no_state_from_the_previous_one(shared_box: DockerSandbox) -> None:
    shared_box.exec("export LEAK=1; cd /tmp; ulimit -n 100; shopt -s extglob; leaked() { :; }", timeout=10)
    result = shared_box.exec("echo ${LEAK:-unset} $(pwd) $(ulimit -n); shopt extglob; type leaked", timeout=10)
    assert result.stdout.text.split("\n")[0] == "unset /workspace 1024"
    assert "extglob        \toff" in result.stdout.text and "leaked: not found" in result.stderr.text


def test_the_harness_leaves_no_trace_in_the_commands_shell(shared_box: DockerSandbox) -> None:
    command = "compgen -v | grep -ci harness; echo \"$BASH_EXECUTION_STRING\" | wc -c; ls /proc/$$/fd | tr '\\n' ' '"
    result = shared_box.exec(command, timeout=10)
    assert result.stdout.text.splitlines() == ["0", str(len(command) + 1), "0 1 2 "]


def test_env_and_cwd_of_each_call_are_honoured(shared_box: DockerSandbox) -> None:
    assert shared_box.exec("echo $X", timeout=10, env={"X": "one"}).stdout.text == "one\n"
    assert shared_box.exec("echo ${X:-none}", timeout=10).stdout.text == "none\n"
    assert shared_box.exec("pwd", timeout=10, cwd="/tmp").stdout.text == "/tmp\n"
    assert shared_box.exec("pwd", timeout=10).stdout.text == "/workspace\n"


def test_multi_line_commands_heredocs_and_exit_work(shared_box: DockerSandbox) -> None:
    script = "cat <<'EOF'\n$HOME is literal\nEOF\nfor i in 1 2; do\n  echo $i\ndone\nexit 7\necho never"
    result = shared_box.exec(script, timeout=10)
    assert result.exit_code == 7 and result.stdout.text == "$HOME is literal\n1\n2\n"


def test_syntax_errors_and_unknown_commands_fail_as_with_bash_c(shared_box: DockerSandbox) -> None:
    syntax = shared_box.exec("if then", timeout=10)
    assert syntax.exit_code == 2 and "syntax error near unexpected token `then'" in syntax.stderr.text
    missing = shared_box.exec("no-such-tool --x", timeout=10)
    assert missing.exit_code == 127 and "line 1: no-such-tool: command not found" in missing.stderr.text


def test_long_commands_and_quotes_arrive_intact(shared_box: DockerSandbox) -> None:
    payload = "x" * 40_000
    result = shared_box.exec(f"printf %s '{payload}' | wc -c; echo \"a'b\" 'c\"d' $'tab\\there' é", timeout=20)
    assert result.stdout.text == "40000\na'b c\"d tab\there é\n"


def test_the_command_runs_in_its_own_process_group_and_session(shared_box: DockerSandbox) -> None:
    result = shared_box.exec("ps -o pid=,pgid=,sid= -p $$", timeout=10)
    pid, pgid, sid = result.stdout.text.split()
    assert pid == pgid == sid


def test_commands_run_in_the_utf8_locale_which_the_image_keeps_in_one_archive(shared_box: DockerSandbox) -> None:
    # one file for glibc to open at each setlocale instead of a folder of 13 (see the Dockerfiles)
    command = ("x=é; echo ${#x} $LANG; localedef --list-archive; LANG=C bash -c 'x=é; echo ${#x}'; "
               "python3 -c 'import locale, sys; "
               "print(locale.setlocale(locale.LC_ALL, \"\"), sys.getfilesystemencoding())'")
    result = shared_box.exec(command, timeout=20)
    # é is one character in the UTF-8 locale, two bytes in the C locale (the control)
    assert result.stdout.text.splitlines() == ["1 C.UTF-8", "C.utf8", "2", "C.UTF-8 utf-8"], result.stderr.text


def test_commands_run_under_the_static_bash_of_the_image_named_as_bin_bash(shared_box: DockerSandbox) -> None:
    """Debian's bash-static starts in half the time (no loader, no libraries); a command sees /bin/bash."""
    command = ("echo \"$BASH|$0|$BASH_VERSION\"; readlink /proc/$$/exe; ps -o comm= -p $$; "
               "/bin/bash -c 'echo $BASH_VERSION'")
    outputs = [shared_box.exec(command, timeout=10, env=env).stdout.text.splitlines()
               for env in ({"A": "fresh bash"}, {"B": "fresh bash again"}, {"B": "fresh bash again"})]
    version = outputs[0][3]
    # the first two get a fresh `bash -c` (their env differs from the last command's), the third the waiting one
    assert outputs == [[f"/bin/bash|/bin/bash|{version}", "/opt/harness/bin/bash", "bash", version]] * 3
    assert version.startswith("5.")


def test_the_static_bash_is_debians_own_build_of_the_same_bash(shared_box: DockerSandbox) -> None:
    result = shared_box.exec("dpkg -S /bin/bash-static /bin/bash | sort; cmp /bin/bash-static /opt/harness/bin/bash "
                             "&& echo same; dpkg-query -W -f '${source:Version}\\n' bash bash-static | uniq | wc -l",
                             timeout=10)
    assert result.stdout.text.splitlines() == ["bash-static: /bin/bash-static", "bash: /bin/bash", "same", "1"]


def test_a_command_of_20_kb_runs_in_the_bash_started_ahead_with_nothing_of_the_harness_left(
        shared_box: DockerSandbox) -> None:
    """The waiting bash reads its command from a file (a pipe cost a system call per byte): a heredoc
    of a few kilobytes, as a model writes files, runs there too, exactly as `bash -c` would run it."""
    shared_box.exec("true", timeout=10)
    time.sleep(0.5)                               # the bash for the next command starts after the answer
    fields = " ".join(["_"] * 20)                 # /proc/$$/stat: the 22nd field is the start, in ticks
    head = (f"read -r _ {fields} start _ < /proc/$$/stat; read -r up _ < /proc/uptime; echo $start $up; "
            "ls /proc/$$/fd | tr '\\n' ' '; echo; echo ${#BASH_EXECUTION_STRING}; cat <<'EOF' | wc -c\n")
    body = ("$HOME `x` \\ 'q' \"d\" é " * 4 + "\n") * 200
    command = head + body + "EOF"
    assert 16_384 < len(command.encode()) < 32_768
    result = shared_box.exec(command, timeout=20)
    start, up, fds, length, size = result.stdout.text.splitlines()[0].split() + result.stdout.text.splitlines()[1:]
    assert float(up) - int(start) / 100 > 0.25, "the command ran in a bash started for it"
    assert (fds, length, size) == ("0 1 2 ", str(len(command)), str(len(body.encode()))), result.stderr.text
