"""The patch of a session: a git baseline outside /workspace (which is the agent's own repository), in
a real sandbox."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.agent.workspace import GIT_DIR, sandbox_patch, start_baseline

pytestmark = pytest.mark.docker


def test_patch_holds_edits_new_and_deleted_files_but_no_caches(sandbox, project_dir: Path, tmp_path: Path) -> None:
    baseline = start_baseline(sandbox)
    result = sandbox.exec("echo hello > notes.txt && rm README.md && sed -i 's/VALUE = 1/VALUE = 2/' pkg/__init__.py"
                          " && mkdir -p pkg/__pycache__ .pytest_cache && touch pkg/__pycache__/x.pyc .pytest_cache/x")
    assert result.ok, result.stderr.text
    assert sandbox.exec("ls pkg/__pycache__/x.pyc").ok          # the cache exists in the workspace ...
    patch = sandbox_patch(sandbox, baseline)
    assert "__pycache__" not in patch and ".pytest_cache" not in patch      # ... and not in the patch
    assert "diff --git a/notes.txt b/notes.txt\nnew file mode" in patch
    assert "diff --git a/README.md b/README.md\ndeleted file mode" in patch
    assert "-VALUE = 1\n+VALUE = 2" in patch
    work = tmp_path / "work"
    shutil.copytree(project_dir, work)
    (tmp_path / "p.diff").write_text(patch)
    subprocess.run(["git", "apply", str(tmp_path / "p.diff")], cwd=work, check=True)
    assert (work / "notes.txt").read_text() == "hello\n" and not (work / "README.md").exists()


def test_the_baseline_is_outside_the_workspace_whose_own_repository_is_the_agents(sandbox) -> None:
    baseline = start_baseline(sandbox)
    assert sandbox.exec(f"test -d {GIT_DIR}").ok                      # the harness's baseline: elsewhere
    own = sandbox.exec("git -C /workspace log --format=%s && git -C /workspace status --porcelain && "
                       "git -C /workspace remote | wc -l")
    assert own.ok and own.stdout.text == "starting state\n0\n"       # one commit, clean, no remote
    assert sandbox.exec("git -C /workspace rev-parse 'HEAD^{tree}'").stdout.text.strip() == baseline.tree
    assert sandbox_patch(sandbox, baseline) == ""                        # the agent's .git is never in the patch


def test_a_change_that_puts_size_and_mtime_back_is_still_in_the_patch(sandbox) -> None:
    """The restored index lets git skip files whose stat data is unchanged; the ctime, which no agent
    can set back, still gives a rewritten file away. (An old mtime, or git would rehash the file as
    racily clean anyway.)"""
    assert sandbox.exec("touch -d '2020-01-01 00:00:00' pkg/__init__.py").ok
    baseline = start_baseline(sandbox)
    sneaky = sandbox.exec("f=pkg/__init__.py; t=$(stat -c %y $f); sed -i 's/VALUE = 1/VALUE = 7/' $f && "
                          "touch -d \"$t\" $f && stat -c %s $f")
    assert sneaky.ok, sneaky.stderr.text
    assert "-VALUE = 1\n+VALUE = 7" in sandbox_patch(sandbox, baseline)


def test_the_agent_repository_shares_nothing_with_the_baseline(sandbox) -> None:
    """Its objects are copies: an agent that prunes or rewrites its own repository leaves the baseline whole."""
    baseline = start_baseline(sandbox)
    wreck = sandbox.exec("echo x >> README.md && rm -rf /workspace/.git/objects/* /workspace/.git/index")
    assert wreck.ok, wreck.stderr.text
    assert "+x" in sandbox_patch(sandbox, baseline)
