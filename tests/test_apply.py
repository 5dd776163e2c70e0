"""`harness apply RUN_DIR`: a run's patch put back into the operator's folder with real git, only when
every touched file still holds what the run started from; `--branch` commits it without touching the
working tree or the index."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.core.apply import PatchConflict, apply_to_tree, load_run
from harness.core.project import select_files
from harness.core.sources import GIT_IDENTITY
from harness.errors import TaskError


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**env, **GIT_IDENTITY},
                          check=True)
    return proc.stdout


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` (outside .git) and its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def make_run(tmp: Path, repo: Path, edit: dict[str, str | None], mode: str = "git", name: str = "run") -> Path:
    """A run folder as `harness run --repo` leaves it: patch.diff from a real `git diff` between the
    folder as it is now (the start) and an edited copy; base.json with the start's hashes."""
    start, edited = tmp / f"{name}-start", tmp / f"{name}-edited"
    for copy in (start, edited):
        shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    for rel, text in edit.items():
        target = edited / rel
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    patch = _diff(tmp, start.name, edited.name)
    files = {rel: (hashlib.sha256((start / rel).read_bytes()).hexdigest() if (start / rel).exists() else None)
             for rel in edit}
    head = git(repo, "rev-parse", "HEAD").strip() if mode == "git" else None
    run = tmp / name
    run.mkdir()
    (run / "patch.diff").write_text(patch)
    (run / "base.json").write_text(json.dumps({"version": 1, "repo": str(repo), "mode": mode, "head": head,
                                               "files": files}))
    return run


def _diff(parent: Path, start: str, edited: str) -> str:
    """`git diff --no-index --binary` of two sibling folders, with the a/ b/ paths of one project."""
    proc = subprocess.run(["git", "diff", "--no-index", "--binary", start, edited], cwd=parent,
                          capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    for side in ("a", "b"):
        for folder in (start, edited):
            out = out.replace(f"{side}/{folder}/", f"{side}/")
    return out


CART = "def total(items):\n    return sum(items)\n"
FIXED = "def total(items, discount=0):\n    return sum(items) - discount\n"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A committed project with uncommitted work the patch does not touch (README.md, notes.txt)."""
    repo = tmp_path / "shop"
    (repo / "shop").mkdir(parents=True)
    (repo / "shop" / "cart.py").write_text(CART)
    (repo / "shop" / "util.py").write_text("X = 1\n")
    (repo / "logo.bin").write_bytes(bytes(range(256)))
    (repo / "README.md").write_text("shop\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    (repo / "README.md").write_text("shop, being edited\n")
    (repo / "notes.txt").write_text("untracked\n")
    return repo


def state(repo: Path) -> tuple[str, str, str]:
    return git(repo, "status", "--porcelain"), git(repo, "diff"), git(repo, "diff", "--cached")


EDIT: dict[str, str | None] = {"shop/cart.py": FIXED, "shop/new.py": "NEW = True\n", "shop/util.py": None}


def test_apply_with_yes_writes_exactly_the_patched_files(tmp_path: Path, checkout: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, checkout, EDIT)
    before, status = snapshot(checkout), git(checkout, "status", "--porcelain").splitlines()
    assert main(["apply", str(run), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "+    return sum(items) - discount" in out                     # the diff is shown first
    assert f"applied 3 file(s) to {checkout} (not staged, not committed)" in out
    after = snapshot(checkout)
    assert after["shop/cart.py"] == FIXED.encode() and after["shop/new.py"] == b"NEW = True\n"
    assert "shop/util.py" not in after
    assert {k: v for k, v in after.items() if k not in EDIT} == {k: v for k, v in before.items() if k not in EDIT}
    touched = (" M shop/cart.py", "?? shop/new.py", " D shop/util.py")
    assert sorted(git(checkout, "status", "--porcelain").splitlines()) == sorted([*status, *touched])
    assert git(checkout, "diff", "--cached") == ""                      # nothing staged


def test_a_file_the_operator_changed_since_the_run_is_refused_and_nothing_written(
        tmp_path: Path, checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, checkout, EDIT)
    (checkout / "shop" / "cart.py").write_text(CART + "# the operator's edit\n")
    before, git_before = snapshot(checkout), state(checkout)
    assert main(["apply", str(run), "--yes"]) == 1
    err = capsys.readouterr().err
    assert "changed since the run started: shop/cart.py (changed)" in err and "Nothing was written" in err
    assert snapshot(checkout) == before and state(checkout) == git_before


def test_a_second_apply_of_the_same_run_is_refused(tmp_path: Path, checkout: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, checkout, EDIT)
    assert main(["apply", str(run), "--yes"]) == 0
    applied = snapshot(checkout)
    capsys.readouterr()
    assert main(["apply", str(run), "--yes", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["applied"] is False
    assert result["changes"] == [{"path": "shop/cart.py", "how": "changed"},
                                 {"path": "shop/new.py", "how": "now exists"},
                                 {"path": "shop/util.py", "how": "deleted"}]
    assert snapshot(checkout) == applied


def test_a_file_the_patch_creates_that_now_exists_is_refused(tmp_path: Path, checkout: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, checkout, EDIT)
    (checkout / "shop" / "new.py").write_text("mine\n")
    before = snapshot(checkout)
    assert main(["apply", str(run), "--yes"]) == 1
    assert "shop/new.py (now exists)" in capsys.readouterr().err
    assert snapshot(checkout) == before


def test_a_touched_path_that_is_a_symbolic_link_is_refused(tmp_path: Path, checkout: Path) -> None:
    run = make_run(tmp_path, checkout, {"shop/cart.py": FIXED})
    outside = tmp_path / "outside.py"
    outside.write_text(CART)
    (checkout / "shop" / "cart.py").unlink()
    (checkout / "shop" / "cart.py").symlink_to(outside)
    with pytest.raises(PatchConflict) as caught:
        apply_to_tree(load_run(run))
    assert [(c.path, c.how) for c in caught.value.changes] == [("shop/cart.py", "is a symbolic link")]
    assert outside.read_text() == CART


def test_branch_commits_the_patch_without_touching_the_tree_or_the_index(
        tmp_path: Path, checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, checkout, EDIT)
    head = git(checkout, "rev-parse", "HEAD").strip()
    before, git_before = snapshot(checkout), state(checkout)
    assert main(["apply", str(run), "--yes", "--branch", "harness/fix"]) == 0
    assert "on the new branch harness/fix" in capsys.readouterr().out
    assert snapshot(checkout) == before and state(checkout) == git_before
    assert git(checkout, "rev-parse", "HEAD").strip() == head
    assert git(checkout, "rev-parse", "harness/fix^").strip() == head
    stat = git(checkout, "show", "harness/fix", "--stat")
    assert "shop/cart.py" in stat and "shop/new.py" in stat and "shop/util.py" in stat
    assert git(checkout, "show", "harness/fix:shop/cart.py") == FIXED
    assert git(checkout, "show", "harness/fix:README.md") == "shop\n"    # the uncommitted edit is not in it


def test_branch_refuses_a_patch_against_uncommitted_work(tmp_path: Path, checkout: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, checkout, {"README.md": "shop, edited by the agent\n"})
    assert main(["apply", str(run), "--yes", "--branch", "harness/fix"]) == 1
    err = capsys.readouterr().err
    assert "the patch is against uncommitted work" in err and "README.md (changed)" in err
    assert git(checkout, "branch", "--list", "harness/fix") == ""
    assert main(["apply", str(run), "--yes"]) == 0                       # the working tree takes it


@pytest.mark.parametrize("name, said", [("main", "a branch of that name exists"),
                                        ("-x", "is not a valid branch name"),
                                        ("a..b", "is not a valid branch name"),
                                        ("@{-1}", "is not a valid branch name")])
def test_branch_refuses_a_taken_or_invalid_name(tmp_path: Path, checkout: Path, capsys: pytest.CaptureFixture[str],
                                                name: str, said: str) -> None:
    run = make_run(tmp_path, checkout, EDIT)
    refs = git(checkout, "for-each-ref")
    assert main(["apply", str(run), "--yes", f"--branch={name}"]) == 2
    assert said in capsys.readouterr().err
    assert git(checkout, "for-each-ref") == refs


def test_a_subfolder_of_a_checkout_is_patched_where_it_is(tmp_path: Path, checkout: Path) -> None:
    project = checkout / "shop"
    run = make_run(tmp_path, project, {"cart.py": FIXED})
    assert main(["apply", str(run), "--yes"]) == 0                       # git apply alone would skip it silently
    assert (project / "cart.py").read_text() == FIXED
    assert main(["apply", str(make_run(tmp_path, checkout / "shop", {"util.py": "X = 2\n"}, name="run2")),
                 "--yes", "--branch", "sub"]) == 0
    assert git(checkout, "show", "sub:shop/util.py") == "X = 2\n"


def test_a_folder_outside_git_is_patched_and_refuses_branch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "cart.py").write_text(CART)
    (folder / "caf\u00e9.py").write_text("A = 1\n")                       # a name git quotes in the diff
    (folder / "other.txt").write_text("keep\n")
    run = make_run(tmp_path, folder, {"cart.py": FIXED, "caf\u00e9.py": "A = 2\n"}, mode="folder")
    assert main(["apply", str(run), "--yes", "--branch", "x"]) == 2
    assert "--branch needs a git checkout" in capsys.readouterr().err
    assert main(["apply", str(run), "--yes"]) == 0
    assert snapshot(folder) == {"cart.py": FIXED.encode(), "caf\u00e9.py": b"A = 2\n", "other.txt": b"keep\n"}


def test_a_binary_change_is_applied_when_allowed(tmp_path: Path, checkout: Path) -> None:
    run = make_run(tmp_path, checkout, {"shop/cart.py": FIXED})
    edited = tmp_path / "run-edited" / "logo.bin"
    edited.write_bytes(bytes(reversed(range(256))))
    patch = _diff(tmp_path, "run-start", "run-edited")
    assert "GIT binary patch" in patch
    (run / "patch.diff").write_text(patch)
    base = json.loads((run / "base.json").read_text())
    base["files"]["logo.bin"] = hashlib.sha256(bytes(range(256))).hexdigest()
    (run / "base.json").write_text(json.dumps(base))
    assert main(["apply", str(run), "--yes"]) == 1                        # refused unless allowed (below)
    assert main(["apply", str(run), "--yes", "--allow-binary"]) == 0
    assert (checkout / "logo.bin").read_bytes() == bytes(reversed(range(256)))


def hostile_run(tmp: Path, repo: Path, path: str) -> Path:
    run = tmp / "hostile"
    run.mkdir()
    (run / "patch.diff").write_text(f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
                                    f"+++ b/{path}\n@@ -0,0 +1 @@\n+owned\n")
    (run / "base.json").write_text(json.dumps({"version": 1, "repo": str(repo), "mode": "folder", "head": None,
                                               "files": {path: None}}))
    return run


@pytest.mark.parametrize("path, said", [("../outside.txt", "climbs out with '..'"),
                                        ("ABS", "is absolute"),
                                        ("-rf", "starts with '-'"),
                                        (".git/hooks/post-checkout", "is inside .git")])
def test_a_hostile_patch_path_is_refused_and_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             path: str, said: str) -> None:
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "a.py").write_text("A = 1\n")
    path = str(tmp_path / "abs.txt") if path == "ABS" else path   # `b//tmp/...` names /tmp/...
    run = hostile_run(tmp_path, repo, path)
    assert main(["apply", str(run), "--yes"]) == 2
    assert said in capsys.readouterr().err
    assert snapshot(repo) == {"a.py": b"A = 1\n"}
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "abs.txt").exists()


def test_a_patch_touching_files_base_json_does_not_list_is_refused(tmp_path: Path, checkout: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, checkout, EDIT)
    base = json.loads((run / "base.json").read_text())
    del base["files"]["shop/new.py"]
    (run / "base.json").write_text(json.dumps(base))
    before = snapshot(checkout)
    assert main(["apply", str(run), "--yes"]) == 2
    assert "the patch touches ['shop/new.py'] that base.json does not list" in capsys.readouterr().err
    assert snapshot(checkout) == before


def test_malformed_or_missing_run_files_say_what_is_wrong(tmp_path: Path, checkout: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, checkout, EDIT)
    (run / "base.json").write_text(json.dumps({"version": 2, "repo": "shop", "mode": "svn", "head": "HEAD",
                                               "files": {"shop/cart.py": "abc"}, "extra": 1}))
    assert main(["apply", str(run), "--yes"]) == 2
    err = capsys.readouterr().err
    for said in ("unknown key 'extra'", "version is 2, expected 1", "repo is 'shop', expected an absolute path",
                 "mode is 'svn'", "head is 'HEAD'", "files['shop/cart.py'] is 'abc', expected 64 lowercase hex",
                 'Expected e.g. {"version": 1'):
        assert said in err
    (run / "base.json").write_text("{not json")
    with pytest.raises(TaskError, match="base.json is not JSON"):
        load_run(run)
    (run / "base.json").unlink()
    assert main(["apply", str(run), "--yes"]) == 2
    assert "base.json is missing; RUN_DIR must be the --out folder of a `harness run --repo` run" in \
        capsys.readouterr().err


def test_without_a_terminal_or_yes_nothing_is_applied(tmp_path: Path, checkout: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path, checkout, EDIT)
    before = snapshot(checkout)
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "apply", str(run)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "stdin is not a terminal to ask on" in proc.stderr and "--yes" in proc.stderr
    assert "+    return sum(items) - discount" in proc.stdout
    assert snapshot(checkout) == before


def _arm(repo: Path, marks: Path) -> None:
    """The repository's own config and hooks name programs for git to run, each leaving a mark."""
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(f"#!/bin/sh\necho hook >> {marks}\n")
    hook.chmod(0o755)
    git(repo, "config", "core.fsmonitor", f"echo fsmonitor >> {marks}; false")


def test_git_on_the_host_runs_no_program_the_repository_names(tmp_path: Path, checkout: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    marks = tmp_path / "marks"
    _arm(checkout, marks)
    git(checkout, "ls-files", "--others")                     # the control: plain git runs them
    git(checkout, "update-ref", "refs/heads/probe", "HEAD")
    assert set(marks.read_text().split()) == {"fsmonitor", "hook"}
    git(checkout, "update-ref", "-d", "refs/heads/probe")
    marks.unlink()
    project = select_files(checkout)                         # what goes into the sandbox
    assert project.mode == "git" and "shop/cart.py" in project.files
    run = make_run(tmp_path, checkout, EDIT)
    assert main(["apply", str(run), "--yes", "--branch", "harness/fix"]) == 0   # rev-parse, commit-tree, update-ref
    assert "on the new branch harness/fix" in capsys.readouterr().out
    assert not marks.exists()


# A patch that changes files git treats as binary: refused unless --allow-binary, and then each such
# file is shown first as what it becomes, as text with every unsafe byte escaped (never as `GIT binary
# patch` data, never as raw control bytes), and applied byte for byte.
SCRIPT = b"#!/bin/sh\necho looks harmless\x00\nrm -rf \"$HOME\"  \x1b[2K\x1b[1A\n"
LOGO = bytes(range(256))


def binary_run(tmp: Path, repo: Path, edit: dict[str, bytes | None]) -> Path:
    """A run folder whose patch.diff is `git diff --binary` of the folder and an edited copy (bytes)."""
    start, edited = tmp / "start", tmp / "edited"
    for copy in (start, edited):
        shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    for rel, data in edit.items():
        if data is None:
            (edited / rel).unlink()
        else:
            (edited / rel).parent.mkdir(parents=True, exist_ok=True)
            (edited / rel).write_bytes(data)
    if (edited / "run.sh").exists():
        (edited / "run.sh").chmod(0o755)
    files = {rel: (hashlib.sha256((start / rel).read_bytes()).hexdigest() if (start / rel).exists() else None)
             for rel in edit}
    run = tmp / "run"
    run.mkdir()
    (run / "patch.diff").write_text(_diff(tmp, start.name, edited.name))
    (run / "base.json").write_text(json.dumps({"version": 1, "repo": str(repo), "mode": "git",
                                               "head": git(repo, "rev-parse", "HEAD").strip(), "files": files}))
    return run


BINARY_EDIT: dict[str, bytes | None] = {"run.sh": SCRIPT, "logo.bin": LOGO[::-1], "shop/cart.py": b"X = 2\n"}


def test_a_binary_patch_is_refused_by_default_and_nothing_is_written(tmp_path: Path, checkout: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = binary_run(tmp_path, checkout, BINARY_EDIT)
    assert "GIT binary patch" in (run / "patch.diff").read_text()       # the probe: git calls these binary
    before = snapshot(checkout)
    assert main(["apply", str(run), "--yes"]) == 1
    said = capsys.readouterr()
    assert "changes 2 file(s) that git treats as binary (logo.bin, run.sh)" in said.err
    assert f"harness apply {run} --allow-binary" in said.err
    assert "GIT binary patch" not in said.out and "zcmY" not in said.out
    assert snapshot(checkout) == before


def test_allowed_binary_changes_are_shown_as_escaped_text_then_applied_byte_for_byte(
        tmp_path: Path, checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = binary_run(tmp_path, checkout, BINARY_EDIT)
    assert main(["apply", str(run), "--yes", "--allow-binary"]) == 0
    out = capsys.readouterr().out
    assert "GIT binary patch" not in out and "literal " not in out
    assert "\x1b" not in out and "\x00" not in out                      # no raw control byte reaches the terminal
    assert "binary to git: run.sh (new file, mode 100755)" in out
    assert "+echo looks harmless\\x00" in out and "\\x1b[2K" in out      # what bash will run, readable
    assert f"sha256 {hashlib.sha256(SCRIPT).hexdigest()}" in out
    assert "binary to git: logo.bin (changed, mode 100644)" in out
    assert f"was:     256 bytes, sha256 {hashlib.sha256(LOGO).hexdigest()}" in out
    assert "+X = 2" in out                                               # the text part is still a diff
    assert (checkout / "run.sh").read_bytes() == SCRIPT and (checkout / "run.sh").stat().st_mode & 0o111
    assert (checkout / "logo.bin").read_bytes() == LOGO[::-1]


def test_allowed_binary_changes_are_shown_for_a_branch_too(tmp_path: Path, checkout: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    run = binary_run(tmp_path, checkout, {"logo.bin": None, "run.sh": SCRIPT})
    (checkout / "logo.bin").write_bytes(b"edited since, uncommitted")   # --branch reads the commit, not the folder
    assert main(["apply", str(run), "--yes", "--allow-binary", "--branch", "fix/bin"]) == 0
    out = capsys.readouterr().out
    assert "binary to git: logo.bin (deleted" in out and "+echo looks harmless\\x00" in out
    assert git(checkout, "show", "fix/bin:run.sh").encode() == SCRIPT
    assert "logo.bin" not in git(checkout, "ls-tree", "--name-only", "fix/bin")
