"""Committing to a branch (`--branch`): the checks (a checkout, a new valid name, a recorded HEAD that
holds the files as the run found them) and a commit of the patch made in a temporary index, on top of
that HEAD; the working tree and the real index are not touched."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from harness.core.apply._git import Place, find_place, git, rev, said
from harness.core.apply.values import PATCH_FILE, Applied, FileChange, How, PatchConflict, RunRecord
from harness.errors import TaskError


def check_branch(run: RunRecord, name: str) -> str:
    """The commit a `--branch name` commit goes on top of (the recorded HEAD, else HEAD), once `run.repo`
    is a git checkout, `name` a valid branch name no branch has, and that commit holds every touched
    file as the run found it.

    Raises:
        TaskError: not a checkout, an invalid or taken name, or the commit is not in the checkout.
        PatchConflict: the commit does not hold the files the run started from (the run began from
            uncommitted work); `.changes` says which.
    """
    place = find_place(run.repo)
    if run.mode != "git" or not place.in_git:
        raise TaskError(f"--branch needs a git checkout, and {run.repo} is a plain folder (the run recorded mode "
                        f"{run.mode!r}); apply to the files instead: harness apply {run.run_dir}")
    checked = git(["check-ref-format", "--branch", name], place.cwd) if not name.startswith("-") else None
    if checked is None or checked.returncode != 0 or checked.stdout.decode().strip() != name:
        raise TaskError(f"--branch {name!r} is not a valid branch name (git check-ref-format --branch refused it, "
                        "or it starts with '-' or '@{'); expected e.g. --branch harness/fix-discount")
    if git(["rev-parse", "--verify", "-q", f"refs/heads/{name}"], place.cwd).returncode == 0:
        raise TaskError(f"--branch {name!r}: a branch of that name exists in {run.repo}; choose a new name, "
                        f"e.g. --branch {name}-2")
    head = run.head or rev(place.cwd, "HEAD")
    if head is None or rev(place.cwd, f"{head}^{{commit}}") is None:
        raise TaskError(f"--branch: the commit the run started from ({head or 'no HEAD'}) is not in {run.repo}; "
                        f"apply to the files instead: harness apply {run.run_dir}")
    changes = tuple(FileChange(rel, how) for rel, how in _tree_changes(run, place, head))
    if changes:
        listed = ", ".join(f"{c.path} ({c.how})" for c in changes)
        raise PatchConflict(f"refusing --branch: the patch is against uncommitted work, not commit {head[:12]}: "
                            f"{listed} differ from that commit. Commit that work first and run again, or apply "
                            f"without --branch: harness apply {run.run_dir}", changes)
    return head


def commit_to_branch(run: RunRecord, name: str) -> Applied:
    """A commit of the patch on top of `check_branch`'s commit, made in a temporary index, on the new
    branch `name` (created only if it still does not exist). The working tree and the real index are
    not touched.

    Raises:
        TaskError, PatchConflict: see `check_branch`; PatchConflict too when the patch does not apply
            to the commit.
    """
    head = check_branch(run, name)
    place = find_place(run.repo)
    with tempfile.TemporaryDirectory(prefix="harness-apply-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        steps = [(["read-tree", head], b""),
                 (["apply", "--cached", "--whitespace=nowarn", *place.directory(), "-"], run.patch.encode()),
                 (["write-tree"], b"")]
        for args, stdin in steps:
            proc = git(args, place.cwd, stdin, env)
            if proc.returncode != 0:
                raise PatchConflict(f"refusing --branch: `git {args[0]}` failed on commit {head[:12]}: "
                                    f"{said(proc)}. Commit your work first or apply without --branch: "
                                    f"harness apply {run.run_dir}")
        tree = proc.stdout.decode().strip()
        message = (f"Apply the patch of harness run {run.run_dir.name}\n\nMade by `harness apply --branch` from "
                   f"{run.run_dir / PATCH_FILE}.\n")
        made = git(["commit-tree", tree, "-p", head, "-F", "-"], place.cwd, message.encode(), env)
    commit = made.stdout.decode().strip()
    if made.returncode != 0 or not commit:
        raise TaskError(f"git commit-tree failed in {run.repo}: {said(made)}")
    ref = git(["update-ref", "-m", "harness apply --branch", f"refs/heads/{name}", commit, ""], place.cwd)
    if ref.returncode != 0:
        raise TaskError(f"--branch {name!r} could not be created in {run.repo} (did it appear meanwhile?): "
                        f"{said(ref)}; choose a new name, e.g. --branch {name}-2")
    return Applied(run.repo, tuple(sorted(run.files)), branch=name, commit=commit)


def _tree_changes(run: RunRecord, place: Place, head: str) -> list[tuple[str, How]]:
    """Each touched file whose content in commit `head` is not what base.json recorded."""
    found: list[tuple[str, How]] = []
    for rel, want in sorted(run.files.items()):
        listed = git(["ls-tree", "-z", "--full-tree", head, "--", place.prefix + rel], place.cwd)
        entry = listed.stdout.decode("utf-8", "surrogateescape").split("\0")[0]
        mode, _, oid = entry.split("\t")[0].partition(" blob ") if entry else ("", "", "")
        if not entry:
            if want is not None:
                found.append((rel, "deleted"))
        elif mode == "120000":
            found.append((rel, "is a symbolic link"))
        elif not oid or want is None:
            found.append((rel, "now exists" if want is None else "is not a regular file"))
        elif hashlib.sha256(git(["cat-file", "blob", oid], place.cwd).stdout).hexdigest() != want:
            found.append((rel, "changed"))
    return found

