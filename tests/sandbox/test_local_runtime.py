"""The test double `LocalRuntime` against the real sandbox: the same scenario, the same answers.

The tool tests run on the double (tests/tools/conftest.py); these tests are what lets them: the
double's compare-and-swap writes, reads, errors, command results and the tools' idempotency keys
agree with the Docker sandbox's exec channel on one scenario run against both.
"""

from __future__ import annotations

import inspect
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.config import Config
from harness.tools.catalog import default_catalog
from sandbox.api import Sandbox
from sandbox.docker_sandbox import DockerSandbox
from sandbox.runtime.local import LocalRuntime
from tests.tools.helpers import Agent

MODULE = "def total(items):\n    return sum(items)\n"


def file_scenario(box: Sandbox, out: Path) -> list[Any]:
    """Writes with and without `expect_sha256`, reads, modes, links, the errors they raise, a copy out."""
    seen: list[Any] = []
    first = box.write_file("cas/a.txt", b"one\n", expect_sha256="")          # only if it does not exist
    seen += [first, box.write_file("cas/a.txt", b"two\n", expect_sha256="")]  # it exists now: conflict
    seen.append(box.write_file("cas/a.txt", b"two\n", expect_sha256="0" * 64))       # stale: conflict
    seen.append(box.write_file("cas/a.txt", b"two\n", expect_sha256=first.sha256))   # matches: written
    seen.append(box.write_file("cas/a.txt", b"two\n", expect_sha256=first.sha256))   # the retry: conflict
    seen.append(box.write_file("/workspace/cas/a.txt", b"three\n"))                 # no check: written
    read = box.read_file("cas/a.txt", max_bytes=2)
    seen.append((read.path, read.realpath, read.data, read.size, read.sha256))
    box.write_file("cas/run.sh", b"#!/bin/sh\n", mode=0o750)
    box.write_file("cas/run.sh", b"#!/bin/sh\nexit 0\n")                         # the mode is kept
    seen.append(box.exec("stat -c %a cas/run.sh && ln -s a.txt cas/link && realpath -m -- /workspace/cas/x")
                .stdout.text)
    seen.append(box.read_file("/workspace/cas/link").realpath)
    for call in (lambda: box.read_file("cas/missing.txt"), lambda: box.read_file("cas"),
                 lambda: box.write_file("cas", b"x"), lambda: box.write_file("cas/a.txt/sub", b"x"),
                 lambda: box.write_file("cas/a.txt/sub", b"x", expect_sha256="")):
        with pytest.raises(OSError) as caught:
            call()
        seen.append((type(caught.value).__name__, caught.value.errno, caught.value.filename))
    result = box.exec("echo out; echo 'Error: bad' >&2; exit 3", error_pattern="Error")
    seen.append((result.exit_code, result.timed_out, result.stdout.text, result.stderr.text,
                 result.stderr.error_lines, result.ok))
    written = sorted(box.copy_out(out, "/workspace/cas"))
    seen.append((written, (out / "a.txt").read_bytes(), (out / "link").is_symlink(), (out / "run.sh").stat().st_mode))
    return seen


def tool_scenario(box: Sandbox) -> list[str]:
    """An edit repeated under one key, a change behind the session, and a stale edit refused."""
    agent = Agent(default_catalog(Config()), box, f"s-{uuid.uuid4().hex[:8]}", "tools")
    path = agent.put("calc.py", MODULE)
    seen = [agent.ok("view", path=path)]
    args = {"path": path, "old": "sum(items)", "new": "sum(items, 0)", "key": "fix-1"}
    seen += [agent.ok("edit", **args), agent.ok("edit", **args), agent.resumed().ok("edit", **args)]
    box.write_file(path, MODULE.replace("items", "xs").encode())
    seen.append(agent.error("edit", path=path, old="def total", new="def summed"))
    seen.append(agent.error("edit", path=path, old="return sum(xs)", new="return sum(ys)"))   # still stale
    agent.ok("view", path=path)
    seen.append(agent.error("edit", path=path, old="return sum(xs)", new="return sum(ys)"))   # the lint gate
    seen.append(agent.content(path))
    return seen


@pytest.mark.docker
def test_the_double_and_the_channel_agree_on_writes_reads_and_errors(sandbox: DockerSandbox,
                                                                    project_dir: Path, tmp_path: Path) -> None:
    with LocalRuntime(tmp_path / "local", project_dir=project_dir) as double:
        assert file_scenario(double, tmp_path / "out-double") == file_scenario(sandbox, tmp_path / "out-channel")


@pytest.mark.docker
def test_the_double_and_the_channel_agree_on_compare_and_swap_and_idempotent_edits(
        sandbox: DockerSandbox, project_dir: Path, tmp_path: Path) -> None:
    with LocalRuntime(tmp_path / "local", project_dir=project_dir) as double:
        on_double = tool_scenario(double)
    on_channel = tool_scenario(sandbox)
    assert on_double == on_channel
    assert on_double[2].startswith("already applied (key 'fix-1')") and "changed since you read it" in on_double[4]


def test_the_double_satisfies_the_sandbox_protocol_with_the_docker_sandboxs_signatures(tmp_path: Path) -> None:
    with LocalRuntime(tmp_path / "local") as double:
        assert isinstance(double, Sandbox)
    for name in ("exec", "read_file", "write_file", "copy_in", "copy_out", "restart_channel", "close"):
        assert inspect.signature(getattr(LocalRuntime, name)) == inspect.signature(getattr(DockerSandbox, name)), name


def test_sandbox_paths_live_under_the_root_and_commands_see_them_so(tmp_path: Path) -> None:
    with LocalRuntime(tmp_path / "local") as double:
        double.write_file("pkg/a.py", b"A = 1\n")
        assert (tmp_path / "local" / "workspace" / "pkg" / "a.py").read_bytes() == b"A = 1\n"
        result = double.exec("pwd; cat /workspace/pkg/a.py; ls -d /tmp/harness/state")
        assert result.stdout.text == "/workspace\nA = 1\n/tmp/harness/state\n"
        assert double.exec("realpath -m -- /etc/x").stdout.text == "/etc/x\n"   # other paths are the host's


def test_output_beyond_the_head_is_cut_and_saved_where_view_can_page_it(tmp_path: Path) -> None:
    with LocalRuntime(tmp_path / "local") as double:
        result = double.exec("seq 1 20000", head_bytes=100, tail_bytes=100)
        out = result.stdout
        assert (out.truncated, out.total_lines, out.total_bytes) == (True, 20000, 108894)
        assert out.head.startswith("1\n2\n") and out.tail.endswith("19999\n20000\n")
        assert out.saved_path is not None and double.read_file(out.saved_path).size == 108894
        small = double.exec("seq 1 5", save_over=(4, 0)).stdout
        assert not small.truncated and small.saved_path is not None   # over the caller's display budget
        assert double.exec("seq 1 5").stdout.saved_path is None


def test_a_command_past_its_timeout_is_killed_with_its_group(tmp_path: Path) -> None:
    with LocalRuntime(tmp_path / "local") as double:
        result = double.exec("sleep 30 & sleep 30", timeout=0.5)
        assert result.timed_out and result.exit_code == 137 and result.duration < 10


def test_closing_removes_the_folder_it_made_and_keeps_one_it_was_given(tmp_path: Path) -> None:
    made = LocalRuntime()
    made.close()
    assert not made.root.exists()
    with LocalRuntime(tmp_path / "given"):
        pass
    assert (tmp_path / "given" / "workspace").is_dir()
