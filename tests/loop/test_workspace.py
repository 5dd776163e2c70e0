"""The patch of a session: a git baseline outside /workspace (which is the agent's own repository), in
a real sandbox."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.workspace import GIT_DIR, sandbox_patch, start_baseline

pytestmark = pytest.mark.docker


def test_patch_holds_edits_new_and_deleted_files_but_no_caches(sandbox, project_dir: Path, tmp_path: Path) -> None:
    tree = start_baseline(sandbox)
    result = sandbox.exec("echo hello > notes.txt && rm README.md && sed -i 's/VALUE = 1/VALUE = 2/' pkg/__init__.py"
                          " && mkdir -p pkg/__pycache__ .pytest_cache && touch pkg/__pycache__/x.pyc .pytest_cache/x")
    assert result.ok, result.stderr.text
    assert sandbox.exec("ls pkg/__pycache__/x.pyc").ok          # the cache exists in the workspace ...
    patch = sandbox_patch(sandbox, tree)
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
    tree = start_baseline(sandbox)
    assert sandbox.exec(f"test -d {GIT_DIR}").ok                      # the harness's baseline: elsewhere
    own = sandbox.exec("git -C /workspace log --format=%s && git -C /workspace status --porcelain && "
                       "git -C /workspace remote | wc -l")
    assert own.ok and own.stdout.text == "starting state\n0\n"       # one commit, clean, no remote
    assert sandbox.exec("git -C /workspace rev-parse 'HEAD^{tree}'").stdout.text.strip() == tree
    assert sandbox_patch(sandbox, tree) == ""                        # the agent's .git is never in the patch
