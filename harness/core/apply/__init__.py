"""Putting a run's patch back into the operator's folder (`harness apply RUN_DIR`).

    load_run(run_dir, repo)        the run's patch.diff and base.json, validated and cross-checked: the
                                   paths the patch touches (as unidiff and as `git apply` read them) are
                                   exactly base.json's `files`, each a plain relative path
    changes_since(run)             the touched files that no longer match base.json (empty: none)
    require_unchanged(run)         PatchConflict listing them, unless there are none
    apply_to_tree(run)             compare-and-swap: the touched files read into a private folder, `git
                                   apply` there, hashes checked again, the results written back
    check_branch(run, name)        for `--branch`: a checkout, a new valid branch name, and a recorded HEAD
                                   that holds the files as the run found them (else: uncommitted work)
    commit_to_branch(run, name)    a commit of the patch on top of the recorded HEAD, on a new branch;
                                   the working tree and the real index are not touched

Contract: nothing is written unless every check passed, and then only the files the patch touches
(`git apply` applies all of a patch or none of it). No path of the patch is followed through a symbolic
link, none may leave the folder, and nothing from the patch becomes a command-line option (the patch
goes to git on stdin). Every read and write in the folder goes through `checks.open_beneath` and
`checks.dir_beneath`: no component of a path is followed through a link, and no git runs in the folder
for `apply_to_tree` (it runs in a private copy of the touched files). For `--branch`, a folder inside a
git checkout is patched with `--directory=<its prefix>`: without it `git apply` run in a subfolder skips
every path silently and succeeds. base.json's own folder is used only when it is reached through no
link and (for a git run) holds the recorded HEAD commit; `--repo` names any other.

Raises `TaskError` for bad input (run folder, base.json, patch, branch name), `PatchConflict` (a
`TaskError` carrying `.changes`) when the folder or the commit no longer holds what the run started from,
and `UnsafePathError` when a run file is a link.

One job per module: run_folder.py reads and checks a run folder (`load_run`); diff_paths.py reads the
paths a patch touches; target.py compares the folder with base.json; tree.py writes the patch into the
folder; branch.py commits it to a new branch; binary.py shows what binary changes write; values.py holds
the values and errors they pass; _git.py runs git for them.
"""

from harness.core.apply.binary import binary_files, describe_binary
from harness.core.apply.branch import check_branch, commit_to_branch
from harness.core.apply.diff_paths import patch_paths
from harness.core.apply.run_folder import load_run
from harness.core.apply.target import changes_since, require_unchanged
from harness.core.apply.tree import apply_to_tree
from harness.core.apply.values import (
    BASE_FILE,
    PATCH_FILE,
    Applied,
    FileChange,
    How,
    Mode,
    NothingToApply,
    PatchConflict,
    RunRecord,
)

__all__ = [
    "BASE_FILE", "PATCH_FILE", "Applied", "FileChange", "How", "Mode", "NothingToApply", "PatchConflict", "RunRecord",
    "apply_to_tree", "binary_files", "changes_since", "check_branch", "commit_to_branch", "describe_binary",
    "load_run", "patch_paths", "require_unchanged",
]
