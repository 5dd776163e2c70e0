"""A prediction is applied as SWE-bench 5.0 applies it: each shape of patch gets the verdict, and leaves
the tree, that the official chain gives it.

The official chain is run here exactly as `swebench/harness/run_evaluation.py` (5.0.2) runs it, in a
real git repository on the host (HEAD = the base commit, SWE-bench's pre-install edits uncommitted, as
in its images; the patches are the test's own): each command of GIT_APPLY_CMDS in order, `git checkout
-- . ; git clean -fd` before every command but the first, and `git apply --check --reverse` once all
failed. Ours runs in a real sandbox holding the same starting tree (no repository, as a task's tree is).
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from harness.patching import APPLY_COMMANDS, apply_in_sandbox
from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox

from .conftest import TEST_LABELS

OFFICIAL_CMDS = ["git apply --verbose", "git apply --verbose --3way", "git apply --verbose --reject",
                 "patch --batch --forward --fuzz=5 -p1 -i"]

BASE = {
    "setup.py": "from setuptools import setup\n\nsetup(\n    name='demo',\n    install_requires=[\n"
                "        'Jinja2>=2.3',\n        'alabaster>=0.7,<0.8',\n    ],\n)\n",
    "tox.ini": "[testenv]\ncommands=\n    pytest --durations 25 {posargs}\n",
    "demo/core.py": "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(12)),
    "demo/other.py": "VALUE = 1\nNAME = 'demo'\n",
}
# SWE-bench's pre-install edits of sphinx (its spec pins Jinja2 and alabaster, adds -rA to tox.ini):
# in the official image they are uncommitted changes in /testbed, in ours part of the starting tree
PRE_INSTALL = {
    "setup.py": BASE["setup.py"].replace("'Jinja2>=2.3'", "'Jinja2<3.0'").replace("'alabaster>=0.7,<0.8'",
                                                                                 "'alabaster>=0.7,<0.7.12'"),
    "tox.ini": BASE["tox.ini"].replace("pytest --durations", "pytest -rA --durations"),
}

SETUP_HUNK = """\
diff --git a/setup.py b/setup.py
--- a/setup.py
+++ b/setup.py
@@ -3,7 +3,7 @@ from setuptools import setup
 setup(
     name='demo',
     install_requires=[
-        'Jinja2>=2.3',
-        'alabaster>=0.7,<0.8',
+        'Jinja2<3.0',
+        'alabaster>=0.7,<0.7.12',
     ],
 )
"""
TOX_HUNK = """\
diff --git a/tox.ini b/tox.ini
--- a/tox.ini
+++ b/tox.ini
@@ -1,3 +1,3 @@
 [testenv]
 commands=
-    pytest --durations 25 {posargs}
+    pytest -rA --durations 25 {posargs}
"""
FIX_HUNK = ("diff --git a/demo/core.py b/demo/core.py\n--- a/demo/core.py\n+++ b/demo/core.py\n"
            "@@ -2,7 +2,7 @@ def f0(x):\n     return x + 0\n \n \n def f1(x):\n-    return x + 1\n"
            "+    return x + 100\n \n \n def f2(x):\n")
# the same change with a context line that is not in the file: git refuses it, `patch --fuzz` takes it
FUZZY_HUNK = FIX_HUNK.replace("     return x + 0\n", "     return x + 0  # a comment the file does not have\n")
OTHER_HUNK = """\
diff --git a/demo/other.py b/demo/other.py
--- a/demo/other.py
+++ b/demo/other.py
@@ -1,2 +1,2 @@
-VALUE = 1
+VALUE = 2
 NAME = 'demo'
"""
WRONG_HUNK = OTHER_HUNK.replace("-VALUE = 1\n+VALUE = 2\n NAME = 'demo'\n",
                                "-VALUE = 7\n+VALUE = 2\n NAME = 'nothing like it'\n")


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _tree(root: Path) -> dict[str, str]:
    """The files under `root` but .git and the .rej / .orig files the tools leave beside them."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts and p.suffix not in (".rej", ".orig")}


def _official(tmp: Path, committed: dict[str, str], uncommitted: dict[str, str], patch: str
              ) -> tuple[bool, str | None, dict[str, str]]:
    """SWE-bench 5.0.2's run_instance patch step, run literally: (applied, the command, the tree after)."""
    repo = tmp / "testbed"
    repo.mkdir()
    _write(repo, committed)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
    _write(repo, uncommitted)
    (tmp / "patch.diff").write_text(patch)
    for attempt, cmd in enumerate(OFFICIAL_CMDS):
        if attempt:
            subprocess.run(["/bin/bash", "-c", "git checkout -- . ; git clean -fd"], cwd=repo, capture_output=True)
        if subprocess.run(f"{cmd} {tmp / 'patch.diff'}", shell=True, cwd=repo, capture_output=True).returncode == 0:
            return True, cmd, _tree(repo)
    reverse = subprocess.run(["git", "apply", "--check", "--reverse", str(tmp / "patch.diff")], cwd=repo,
                             capture_output=True)
    return reverse.returncode == 0, "verified already applied" if reverse.returncode == 0 else None, _tree(repo)


def _ours(tmp: Path, image: str, start: dict[str, str], patch: str):  # type: ignore[no-untyped-def]
    project = tmp / "start"
    project.mkdir()
    _write(project, start)
    spec = SandboxSpec(image=image, session=f"test-chain-{uuid.uuid4().hex[:8]}", project_dir=project,
                       labels=TEST_LABELS)
    with DockerSandbox(spec) as box:
        outcome = apply_in_sandbox(box, patch, "model")
        tree = {rel: box.read_file(rel).data.decode() for rel in start}
    return outcome, tree


def _both(tmp_path: Path, image: str, patch: str, committed: dict[str, str] = BASE,
          uncommitted: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    (tmp_path / "official").mkdir()
    official = _official(tmp_path / "official", committed, uncommitted or {}, patch)
    outcome, tree = _ours(tmp_path, image, {**committed, **(uncommitted or {})}, patch)
    return official, outcome, tree


def test_sphinx_shape_the_pre_install_edits_submitted_with_the_fix_apply_as_officially(tmp_path, sandbox_image):
    patch = SETUP_HUNK + TOX_HUNK + FIX_HUNK
    (applied, command, official_tree), outcome, tree = _both(tmp_path, sandbox_image, patch, uncommitted=PRE_INSTALL)
    # officially: `git apply` fails on the uncommitted edits, the reset removes them, and --3way applies all
    assert (applied, command) == (True, "git apply --verbose --3way")
    assert outcome.applied and outcome.command == ("patch --batch --forward --fuzz=5 -p1 -i + "
                                                   "git apply --check --reverse")
    assert "Reversed (or previously applied) patch detected!  Skipping patch." in outcome.output
    assert "verified already applied" in outcome.output
    assert tree == official_tree          # the same files after: the pins, -rA, the fix
    assert "return x + 100" in tree["demo/core.py"] and "'Jinja2<3.0'" in tree["setup.py"]


def test_a_patch_already_wholly_in_the_tree_counts_as_applied_and_is_not_reversed(tmp_path, sandbox_image):
    patched = {**BASE, "demo/core.py": BASE["demo/core.py"].replace("x + 1\n", "x + 100\n")}
    (applied, command, official_tree), outcome, tree = _both(tmp_path, sandbox_image, FIX_HUNK, committed=patched)
    assert (applied, command) == (True, "verified already applied")
    assert outcome.applied and outcome.command is not None and outcome.command.endswith("--check --reverse")
    assert tree == official_tree == patched       # SWE-bench 4.x's `patch --batch` (no --forward) reversed it


def test_a_hunk_that_needs_fuzz_is_applied_by_patch_as_officially(tmp_path, sandbox_image):
    (applied, command, official_tree), outcome, tree = _both(tmp_path, sandbox_image, FUZZY_HUNK)
    assert (applied, command) == (True, "patch --batch --forward --fuzz=5 -p1 -i")
    assert outcome.applied and outcome.command == command
    assert "with fuzz" in outcome.output
    assert tree == official_tree and "return x + 100" in tree["demo/core.py"]


def test_a_patch_reject_half_applies_is_put_back_before_patch_applies_it_whole(tmp_path, sandbox_image):
    patch = OTHER_HUNK + FUZZY_HUNK      # --reject applies other.py and rejects the fuzzy hunk: exit 1
    (applied, command, official_tree), outcome, tree = _both(tmp_path, sandbox_image, patch)
    assert (applied, command) == (True, "patch --batch --forward --fuzz=5 -p1 -i")
    assert outcome.applied and outcome.command == command
    said = outcome.output
    assert said.index("$ git apply --verbose --reject model.patch") < said.index("Applied patch demo/other.py cleanly.")
    # without the tree put back, patch --forward would skip other.py's hunk as already applied and fail
    assert "previously applied" not in said.split("$ patch ")[1]
    assert tree == official_tree and tree["demo/other.py"].startswith("VALUE = 2\n")


def test_a_patch_no_command_applies_is_patch_failed_with_each_commands_output(tmp_path, sandbox_image):
    (applied, command, official_tree), outcome, tree = _both(tmp_path, sandbox_image, FIX_HUNK + WRONG_HUNK)
    assert (applied, command) == (False, None)
    assert not outcome.applied and outcome.command is None
    heads = [line for line in outcome.output.splitlines() if line.startswith("$ ")]
    assert heads == [f"$ {' '.join(cmd)} model.patch" for cmd in APPLY_COMMANDS] + [
        "$ git apply --check --reverse model.patch"]
    assert "error: patch failed: demo/other.py:1" in outcome.output
    assert "1 out of 1 hunk FAILED" in outcome.output


@pytest.mark.parametrize("patch", ["", "   \n"])
def test_an_empty_patch_applies_without_a_command(tmp_path, sandbox_image, patch):
    outcome, tree = _ours(tmp_path, sandbox_image, BASE, patch)
    assert outcome.applied and outcome.command == "empty patch" and tree == BASE
