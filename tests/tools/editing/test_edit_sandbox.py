"""`edit` and `write` on the test double: compare-and-swap, idempotency keys, lint gate, the file lock."""

from __future__ import annotations

import threading

from tests.tools.helpers import Agent

MODULE = "def total(items):\n    return sum(items)\n\n\ndef mean(items):\n    return total(items) / len(items)\n"


def test_edit_after_view_applies_and_returns_the_numbered_region(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE)
    agent.ok("view", path=path)
    out = agent.ok("edit", path=path, old="    return sum(items)\n", new="    return sum(items, 0)\n")
    assert out.startswith(f"edited {path} (line 2 now; the file has 6 lines):\n")
    assert "1  def total(items):\n2      return sum(items, 0)\n3  \n4  \n5  def mean(items):" in out
    assert agent.content(path) == MODULE.replace("sum(items)", "sum(items, 0)")


def test_edit_of_a_file_never_read_is_refused_then_allowed_after_view(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE)
    message = agent.error("edit", path=path, old="sum(items)", new="sum(items, 0)")
    assert message == (f"{path} has not been read in this session, so an edit could overwrite changes you "
                       f"have not seen; view it first (view(path=\"{path}\")) and then edit")
    assert agent.content(path) == MODULE
    agent.ok("view", path=path)
    agent.ok("edit", path=path, old="sum(items)", new="sum(items, 0)")


def test_edit_after_the_file_changed_behind_the_session_is_refused(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE)
    agent.ok("view", path=path)
    agent.ok("bash", command=f"sed -i 's/len(items)/max(len(items), 1)/' {path}")
    message = agent.error("edit", path=path, old="sum(items)", new="sum(items, 0)")
    assert f"{path} changed since you read it" in message
    assert "view it again and redo the edit on what it holds now" in message
    assert "max(len(items), 1)" in agent.content(path) and "sum(items, 0)" not in agent.content(path)
    agent.ok("view", path=path)
    agent.ok("edit", path=path, old="sum(items)", new="sum(items, 0)")


def test_two_sessions_on_one_file_the_stale_one_is_refused(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE)
    other = Agent(agent.catalog, agent.sandbox, agent.ctx.session + "-b", agent.folder)
    agent.ok("view", path=path)
    other.ok("view", path=path)
    other.ok("edit", path=path, old="def mean(items):", new="def average(items):")
    assert "changed since you read it" in agent.error("edit", path=path, old="sum(items)", new="sum(items, 0)")
    agent.ok("view", path=path)
    agent.ok("edit", path=path, old="sum(items)", new="sum(items, 0)")
    assert "def average(items)" in agent.content(path) and "sum(items, 0)" in agent.content(path)


def test_repeated_key_reports_already_applied_and_changes_nothing(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE)
    agent.ok("view", path=path)
    args = {"path": path, "old": "def mean(items):\n", "new": "def mean(items):\n    # average\n"}
    first = agent.call("edit", call_id="toolu_retry", **args)
    again = agent.call("edit", call_id="toolu_retry", **args)
    assert not again.is_error
    assert again.content == ("already applied (key 'toolu_retry'); nothing was changed now. Result of the "
                             f"first call:\n{first.content}")
    assert agent.content(path).count("# average") == 1


def test_key_reused_for_a_different_call_is_refused(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE)
    agent.ok("view", path=path)
    agent.ok("edit", path=path, old="sum(items)", new="sum(items, 0)", key="k1")
    message = agent.error("edit", path=path, old="len(items)", new="max(len(items), 1)", key="k1")
    assert message.startswith("the key 'k1' was already used by another call (edit) with different arguments")
    assert "len(items)" in agent.content(path) and "max(" not in agent.content(path)


def test_applied_keys_and_fingerprints_survive_a_harness_restart(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE)
    agent.ok("view", path=path)
    args = {"path": path, "old": "sum(items)", "new": "sum(items, 0)", "key": "fix-sum"}
    agent.ok("edit", **args)
    resumed = agent.resumed()
    assert resumed.ok("edit", **args).startswith("already applied (key 'fix-sum')")
    resumed.ok("edit", path=path, old="len(items)", new="max(len(items), 1)")   # no view needed
    assert agent.content(path).count("sum(items, 0)") == 1


def test_edit_adding_a_lint_error_is_rolled_back_with_the_error_line(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE)
    agent.ok("view", path=path)
    message = agent.error("edit", path=path, old="return sum(items)", new="return sum(itemz)")
    assert message.startswith("the edit was rolled back (nothing was written) because pyflakes found new errors:")
    assert "line 2: undefined name 'itemz'" in message
    assert agent.content(path) == MODULE
    agent.ok("edit", path=path, old="return sum(items)", new="return sum(list(items))")


def test_preexisting_lint_errors_do_not_block_and_are_reported(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE + "\nBROKEN = undefined_name\n")
    agent.ok("view", path=path)
    out = agent.ok("edit", path=path, old="sum(items)", new="sum(items, 0)")
    assert "1 problem(s) pyflakes reported before this edit are still there (not blocking)" in out


def test_anchor_errors_reach_the_model_as_observations(agent: Agent) -> None:
    path = agent.put("calc.py", MODULE)
    agent.ok("view", path=path)
    assert "`old` occurs 2 times in" in agent.error("edit", path=path, old="    return ", new="    return 0 + ")
    assert "occurs 5 times in" in agent.error("edit", path=path, old="(items)", new="(xs)")
    missing = agent.error("edit", path=path, old="def mean(items) :", new="def mean(xs):")
    assert "`old` does not occur in" in missing and "line 5" in missing
    assert agent.content(path) == MODULE
    agent.ok("edit", path=path, old="def mean(items):", new="def mean(items):  # arithmetic")


def test_write_creates_a_file_and_replacing_it_needs_a_read(agent: Agent) -> None:
    path = f"{agent.folder}/new/module.py"
    out = agent.ok("write", path=path, content="X = 1\n")
    assert out.startswith(f"created {path} (line 1 now; the file has 1 lines):")
    assert agent.content(path) == "X = 1\n"
    agent.ok("write", path=path, content="X = 2\n")        # the session wrote it, so it knows it
    other = agent.put("other.py", "Y = 1\n")
    assert "has not been read in this session" in agent.error("write", path=other, content="Y = 2\n")
    assert agent.content(other) == "Y = 1\n"
    agent.ok("view", path=other)
    agent.ok("write", path=other, content="Y = 2\n")
    assert agent.content(other) == "Y = 2\n"


def test_concurrent_edits_in_one_session_are_serialised_by_the_file_lock(agent: Agent) -> None:
    path = agent.put("many.py", "".join(f"V{i} = {i}\n" for i in range(8)))
    agent.ok("view", path=path)
    results: list[bool] = []

    def change(i: int) -> None:
        res = agent.call("edit", path=path, old=f"V{i} = {i}\n", new=f"V{i} = {i * 10}\n")
        results.append(res.is_error)

    threads = [threading.Thread(target=change, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [False] * 8
    assert agent.content(path) == "".join(f"V{i} = {i * 10}\n" for i in range(8))


def test_two_sessions_racing_on_one_file_exactly_one_edit_lands(agent: Agent) -> None:
    path = agent.put("race.py", MODULE)
    sessions = [agent] + [Agent(agent.catalog, agent.sandbox, f"{agent.ctx.session}-{n}", agent.folder)
                          for n in range(3)]
    for s in sessions:
        s.ok("view", path=path)
    outcomes: list[str] = []

    def change(n: int) -> None:
        res = sessions[n].call("edit", path=path, old="def mean(items):\n", new=f"def mean(items):  # by {n}\n")
        outcomes.append("ok" if not res.is_error else res.content)

    threads = [threading.Thread(target=change, args=(n,)) for n in range(len(sessions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 1
    assert all("changed" in o and "view it again" in o for o in outcomes if o != "ok")
    assert agent.content(path).count("# by ") == 1


def test_non_utf8_file_is_refused_by_edit_with_a_way_out(agent: Agent) -> None:
    path = f"{agent.folder}/latin1.txt"
    agent.sandbox.write_file(path, "café\n".encode("latin-1"))
    agent.ok("view", path=path)
    message = agent.error("edit", path=path, old="caf", new="cafe")
    assert message.startswith(f"{path} is not valid UTF-8 (byte 3: ")
    assert "use bash (e.g. iconv, sed)" in message
    utf8 = agent.put("utf8.txt", "café\n")
    agent.ok("view", path=utf8)
    agent.ok("edit", path=utf8, old="café", new="cafe")


def test_refusals_of_the_file_tools_carry_their_kind(agent: Agent) -> None:
    path = agent.put("kinds.py", "x = 1\n")
    assert agent.call("edit", path=path, old="x = 1", new="x = 2").error_kind == "edit"   # never viewed
    assert agent.call("view", path=f"{agent.folder}/nope.py").error_kind == "path"
    assert agent.call("view", path="../etc/passwd").error_kind == "path"
    assert agent.call("view", path=path).error_kind is None
