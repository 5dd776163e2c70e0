"""`view`, `search` and `find_code` on the test double; path escapes and the shell's saved outputs in a
real sandbox (on the double, a path out of the workspace would be the host's own)."""

from __future__ import annotations

import re

import pytest

from tests.tools.helpers import Agent

LONG = "".join(f"line {i}\n" for i in range(1, 301))


def test_view_shows_100_numbered_lines_with_counts_above_and_below(agent: Agent) -> None:
    path = agent.put("long.txt", LONG)
    out = agent.ok("view", path=path, line=150)
    lines = out.split("\n")
    assert lines[0] == f"{path}: lines 101-200 of 300 (100 above, 100 below)"
    assert lines[1] == "101  line 101" and lines[100] == "200  line 200"
    assert lines[101] == f"[100 more lines below: view(path=\"{path}\", line=250)]"
    end = agent.ok("view", path=path, line=250).split("\n")
    assert end[0] == f"{path}: lines 201-300 of 300 (200 above, 0 below)" and len(end) == 101


def test_view_of_a_directory_lists_it_and_a_missing_file_is_an_error(agent: Agent) -> None:
    agent.put("sub/a.py", "A = 1\n")
    agent.put("b.txt", "b\n")
    out = agent.ok("view", path=agent.folder)
    assert out == f"{agent.folder}/ is a directory with 2 entries (directories end with /):\nsub/\nb.txt"
    assert agent.error("view", path=f"{agent.folder}/nope.py").startswith(
        f"'{agent.folder}/nope.py' does not exist")


@pytest.mark.docker
def test_paths_leaving_the_workspace_are_refused_and_inside_links_work(docker_agent: Agent) -> None:
    agent = docker_agent
    agent.put("real.py", "R = 1\n")
    agent.ok("bash", command=f"cd {agent.folder} && ln -s /etc etc_link && ln -s real.py alias.py")
    assert "contains '..'" in agent.error("view", path=f"{agent.folder}/../../etc/passwd")
    assert "is outside /workspace" in agent.error("view", path="/etc/passwd")
    message = agent.error("view", path=f"{agent.folder}/etc_link/passwd")
    assert "is a symlink (or goes through one) that leads to '/etc/passwd'" in message
    creating = agent.error("write", path=f"{agent.folder}/etc_link/evil.conf", content="x")
    assert "leads to '/etc/evil.conf', outside /workspace" in creating
    assert agent.sandbox.exec("test -e /etc/evil.conf").exit_code == 1
    assert "R = 1" in agent.ok("view", path=f"{agent.folder}/alias.py")        # positive control
    agent.ok("edit", path=f"{agent.folder}/alias.py", old="R = 1", new="R = 2")
    assert agent.content(f"{agent.folder}/real.py") == "R = 2\n"


@pytest.mark.docker
def test_saved_shell_output_can_be_viewed(docker_agent: Agent) -> None:
    agent = docker_agent
    out = agent.ok("view", path="/tmp/harness/output")
    assert "is a directory" in out


def test_search_lists_matches_and_distinguishes_none_from_failure(agent: Agent) -> None:
    agent.put("a.py", "def count_words(text):\n    return 0\n")
    agent.put("b.py", "from a import count_words\n")
    out = agent.ok("search", pattern=r"count_words\(", path=agent.folder)
    assert out == (f"1 match in 1 file for 'count_words\\\\(' in '{agent.folder}':\n"
                   f"{agent.folder}/a.py:1: def count_words(text):")
    assert agent.ok("search", pattern="no_such_name_anywhere", path=agent.folder) == (
        f"no matches for 'no_such_name_anywhere' in '{agent.folder}'")
    bad = agent.error("search", pattern="count_words(", path=agent.folder)
    assert bad.startswith("search failed for pattern 'count_words(' in") and "escape ( )" in bad
    missing = agent.error("search", pattern="x", path=f"{agent.folder}/nowhere")
    assert missing.startswith(f"search failed: '{agent.folder}/nowhere' does not exist")


def test_search_caps_at_50_and_says_how_many_in_which_files(agent: Agent) -> None:
    agent.put("big.py", "hit = 1\n" * 70)
    agent.put("small.py", "hit = 2\n" * 5)
    out = agent.ok("search", pattern="hit", path=agent.folder)
    head, *rows = out.split("\n")
    assert head.startswith(f"75 matches in 2 files for 'hit' in '{agent.folder}'; showing the first 50. "
                           f"Most matches: {agent.folder}/big.py (70), {agent.folder}/small.py (5).")
    assert "Narrow the pattern or give a path" in head
    assert len(rows) == 50


def test_find_code_ranks_functions_and_follows_changes(agent: Agent) -> None:
    agent.put("widgets.py", "def frobnicate_widgets(items):\n    return [i for i in items]\n")
    agent.put("gizmos.py", "def quantize_gizmos(level):\n    return int(level) * 3600\n")
    out = agent.ok("find_code", query="frobnicating the widgets", k=3)
    assert out.split("\n")[1].startswith(f"1. {agent.folder}/widgets.py:1-2  function frobnicate_widgets")
    agent.ok("bash", command=f"rm {agent.folder}/widgets.py && printf 'def frobnicate_gadgets(t):\\n    return 0\\n'"
                             f" > {agent.folder}/gadgets.py")
    out = agent.ok("find_code", query="frobnicating the widgets", k=3)
    assert "widgets.py" not in out
    assert out.split("\n")[1].startswith(f"1. {agent.folder}/gadgets.py:1-2  function frobnicate_gadgets")
    assert "re-indexed files: 1 new, 1 removed" in out


def test_view_of_a_file_too_big_to_hold_shows_its_start_and_how_to_read_the_rest(agent: Agent) -> None:
    path = f"{agent.folder}/huge.log"
    agent.ok("bash", command=f"mkdir -p {agent.folder} && seq 1 1500000 > {path}")
    out = agent.ok("view", path=path, line=1)
    assert out.startswith(f"[{path} has 10,888,896 bytes; only its first 8,388,608 bytes")
    assert f"`tail -n 100 {path}`" in out
    assert "\n  1  1\n  2  2\n" in out


def test_search_in_a_single_file_names_the_file(agent: Agent) -> None:
    path = agent.put("one.py", "alpha = 1\nbeta = 2\n")
    assert agent.ok("search", pattern="beta", path=path) == (f"1 match in 1 file for 'beta' in '{path}':\n"
                                                             f"{path}:2: beta = 2")


@pytest.mark.docker
def test_truncated_shell_output_can_be_paged_with_view_and_search(docker_agent: Agent) -> None:
    agent = docker_agent
    out = agent.ok("bash", command="seq 1 20000")
    match = re.search(r'view\(path="(/tmp/harness/output/[^"]+)", line=(\d+)\)', out)
    assert match, out
    saved, line = match.group(1), int(match.group(2))
    page = agent.ok("view", path=saved, line=line)
    assert f"{line}  {line}" in page and "of 20000" in page.split("\n")[0]
    assert agent.ok("search", pattern="^19999$", path=saved).endswith(":19999: 19999")
