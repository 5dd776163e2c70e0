"""`harness apply` of a patch that changes files git treats as binary: refused unless --allow-binary,
and then each such file is shown first as what it becomes, as text with every unsafe byte escaped
(never as `GIT binary patch` data, never as raw control bytes), and applied byte for byte."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from harness.cli.main import main
from tests.test_apply import _diff, git, snapshot
from tests.test_apply import checkout as checkout  # the fixture, by name

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


EDIT: dict[str, bytes | None] = {"run.sh": SCRIPT, "logo.bin": LOGO[::-1], "shop/cart.py": b"X = 2\n"}


def test_a_binary_patch_is_refused_by_default_and_nothing_is_written(tmp_path: Path, checkout: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = binary_run(tmp_path, checkout, EDIT)
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
    run = binary_run(tmp_path, checkout, EDIT)
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
