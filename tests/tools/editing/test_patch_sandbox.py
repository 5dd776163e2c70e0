"""`apply_patch`: several files, all or nothing, create and delete; on the test double, except where a
file permission must hold (a real sandbox: the tests may run as root)."""

from __future__ import annotations

import pytest

from tests.tools.helpers import Agent

A = "def a():\n    return 1\n\n\ndef a2():\n    return 11\n"
B = "def b():\n    return 2\n"


def _two_files(agent: Agent) -> tuple[str, str]:
    pa, pb = agent.put("a.py", A), agent.put("b.py", B)
    agent.ok("view", path=pa)
    agent.ok("view", path=pb)
    return pa, pb


def test_multi_file_patch_applies_and_shows_each_region(agent: Agent) -> None:
    pa, pb = _two_files(agent)
    patch = (f"--- a/{pa}\n+++ b/{pa}\n@@ -5,2 +5,2 @@\n def a2():\n-    return 11\n+    return 12\n"
             f"--- a/{pb}\n+++ b/{pb}\n@@ -1,2 +1,2 @@\n def b():\n-    return 2\n+    return 3\n")
    out = agent.ok("apply_patch", patch=patch)
    assert f"edited {pa} (changed lines now at 5-6):" in out and f"edited {pb} (changed lines now at 1-2):" in out
    assert "6      return 12" in out
    assert agent.content(pa) == A.replace("11", "12") and agent.content(pb) == B.replace("2", "3")


def test_hunk_mismatch_in_one_file_leaves_every_file_unchanged(agent: Agent) -> None:
    pa, pb = _two_files(agent)
    patch = (f"--- a/{pa}\n+++ b/{pa}\n@@ -1,2 +1,2 @@\n def a():\n-    return 1\n+    return 100\n"
             f"--- a/{pb}\n+++ b/{pb}\n@@ -1,2 +1,2 @@\n def b():\n-    return 999\n+    return 3\n")
    message = agent.error("apply_patch", patch=patch)
    assert message.startswith("the patch was not applied; no file was changed:")
    assert f"hunk 1 (@@ -1,2 +1,2 @@) of {pb} does not match the file anywhere" in message
    assert ("expected near line 1:\n  def b():\n      return 999\n"
            "but the file has there:\n1  def b():\n2      return 2") in message
    assert agent.content(pa) == A and agent.content(pb) == B
    agent.ok("apply_patch", patch=patch.replace("return 999", "return 2"))
    assert "return 100" in agent.content(pa) and "return 3" in agent.content(pb)


@pytest.mark.docker
def test_failed_write_midway_rolls_back_the_files_already_written(docker_agent: Agent) -> None:
    agent = docker_agent
    pa, pb = _two_files(agent)
    locked = agent.put("locked/c.py", "C = 1\n")
    agent.ok("view", path=locked)
    agent.ok("bash", command=f"chmod 555 {agent.folder}/locked")
    patch = (f"--- a/{pa}\n+++ b/{pa}\n@@ -1,2 +1,2 @@\n def a():\n-    return 1\n+    return 100\n"
             f"--- a/{locked}\n+++ b/{locked}\n@@ -1 +1 @@\n-C = 1\n+C = 2\n")
    message = agent.error("apply_patch", patch=patch)
    agent.ok("bash", command=f"chmod 755 {agent.folder}/locked")
    assert f"could not write {locked}: Permission denied" in message
    assert message.endswith("No file was changed by this call.")
    assert agent.content(pa) == A and agent.content(locked) == "C = 1\n"
    agent.ok("edit", path=pa, old="return 1\n", new="return 100\n")   # fingerprints still right


def test_patch_creates_and_deletes_files(agent: Agent) -> None:
    pa, pb = _two_files(agent)
    new = f"{agent.folder}/pkg/new.py"
    patch = (f"--- /dev/null\n+++ b/{new}\n@@ -0,0 +1,2 @@\n+def n():\n+    return 0\n"
             f"--- a/{pb}\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-def b():\n-    return 2\n")
    out = agent.ok("apply_patch", patch=patch)
    assert f"created {new}" in out and f"deleted {pb}" in out
    assert agent.content(new) == "def n():\n    return 0\n"
    assert agent.sandbox.exec(f"test -e {pb}").exit_code == 1


def test_patch_adding_a_lint_error_rolls_back_the_whole_patch(agent: Agent) -> None:
    pa, pb = _two_files(agent)
    patch = (f"--- a/{pa}\n+++ b/{pa}\n@@ -1,2 +1,2 @@\n def a():\n-    return 1\n+    return 100\n"
             f"--- a/{pb}\n+++ b/{pb}\n@@ -1,2 +1,2 @@\n def b():\n-    return 2\n+    return undefined_b\n")
    message = agent.error("apply_patch", patch=patch)
    assert "line 2: undefined name 'undefined_b'" in message
    assert agent.content(pa) == A and agent.content(pb) == B
    agent.ok("apply_patch", patch=patch.replace("undefined_b", "b.__name__"))
    assert "return b.__name__" in agent.content(pb)


def test_patch_on_a_file_not_read_or_changed_since_is_refused(agent: Agent) -> None:
    pa = agent.put("a.py", A)
    patch = f"--- a/{pa}\n+++ b/{pa}\n@@ -1,2 +1,2 @@\n def a():\n-    return 1\n+    return 100\n"
    assert "has not been read in this session" in agent.error("apply_patch", patch=patch)
    agent.ok("view", path=pa)
    agent.ok("bash", command=f"echo '# touched' >> {pa}")
    assert "changed since you read it" in agent.error("apply_patch", patch=patch)
    agent.ok("view", path=pa)
    agent.ok("apply_patch", patch=patch)
    assert "return 100" in agent.content(pa)


def test_repeated_patch_key_is_already_applied(agent: Agent) -> None:
    pa, _ = _two_files(agent)
    patch = f"--- a/{pa}\n+++ b/{pa}\n@@ -1,2 +1,3 @@\n def a():\n+    # one\n     return 1\n"
    agent.ok("apply_patch", patch=patch, key="p1")
    assert agent.ok("apply_patch", patch=patch, key="p1").startswith("already applied (key 'p1')")
    assert agent.content(pa).count("# one") == 1
