"""`harness apply RUN_DIR`: show a `harness run --repo` patch, ask, and apply it to the folder (or commit
it on a new branch). The work is in `harness.core.apply`; this module parses and prints.

The folder to patch is printed first, always (with --yes and --json too), and where it came from:
base.json, which must name a checkout of the run's repository, or --repo.

Exit codes: 0 applied, or nothing to apply (the run changed nothing); 1 refused (a file changed since
the run, the patch is against uncommitted work, not confirmed); 2 bad input (run folder, base.json,
patch, branch name, a recorded folder that is not a checkout of the run's repository).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from rich.console import Console

from harness.cli.common import EXIT_FAILED, print_safe
from harness.core.apply import (
    Applied,
    NothingToApply,
    PatchConflict,
    RunRecord,
    apply_to_tree,
    binary_files,
    check_branch,
    commit_to_branch,
    describe_binary,
    load_run,
    require_unchanged,
)
from harness.core.binary_patch import shown_patch
from sandbox.text import escape_unsafe


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("apply", help="review a `harness run --repo` patch and apply it to your folder",
                       description="Show the patch of RUN_DIR (the --out folder of `harness run --repo`), ask, "
                                   "then write it into your folder with `git apply` (nothing staged or committed), "
                                   "or commit it on a new branch with --branch. Refused, with nothing written, when "
                                   "a file it touches changed since the run started.",
                       epilog="e.g. harness apply runs/shop-20260101-120000 --branch harness/fix-discount")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run's folder (holds patch.diff and base.json)")
    p.add_argument("--repo", metavar="PATH", help="the folder to patch (default: the one the run recorded)")
    p.add_argument("--yes", action="store_true", help="apply without asking (needed when stdin is not a terminal)")
    p.add_argument("--branch", metavar="NAME", help="commit the patch on a new branch NAME on top of the commit the "
                                                    "run started from; your files and index are not touched")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON (the diff goes to stderr)")
    p.add_argument("--allow-binary", action="store_true",
                   help="apply a patch that changes files git treats as binary (refused by default: their diff is "
                        "encoded data); each is shown first as text, every unsafe byte escaped")
    p.set_defaults(func=_apply)


def _apply(args: argparse.Namespace) -> int:
    try:
        run = load_run(args.run_dir, args.repo)
    except NothingToApply as exc:
        if args.json:
            print(json.dumps({"applied": False, "nothing_to_apply": True, "message": str(exc)}, indent=2))
        else:
            print_safe(sys.stdout, f"harness apply: {exc}")
        return 0
    print_safe(sys.stderr if args.json else sys.stdout, _target_line(run))
    try:
        head = check_branch(run, args.branch) if args.branch is not None else None
        if head is None:
            require_unchanged(run)   # said before the diff is shown; checked again right before writing
        shown = _binary_shown(run, head, args.allow_binary)
        show_diff(shown_patch(run.patch, "below") if shown else run.patch, sys.stderr if args.json else sys.stdout)
        for line in shown:
            print_safe(sys.stderr if args.json else sys.stdout, line)
        if not _confirmed(run, args.yes):
            return EXIT_FAILED
        done = commit_to_branch(run, args.branch) if args.branch is not None else apply_to_tree(run)
    except BinaryRefused as exc:
        if args.json:
            print(json.dumps({"applied": False, "repo": str(run.repo), "error": str(exc)}, indent=2))
        print_safe(sys.stderr, f"harness apply: {exc}")
        return EXIT_FAILED
    except PatchConflict as exc:
        if args.json:
            print(json.dumps({"applied": False, "repo": str(run.repo), "error": str(exc),
                              "changes": [{"path": c.path, "how": c.how} for c in exc.changes]}, indent=2))
        print_safe(sys.stderr, f"harness apply: {exc}")
        return EXIT_FAILED
    if args.json:
        print(json.dumps(done.to_json(), indent=2))
    else:
        _summary(done)
    return 0


class BinaryRefused(Exception):
    """The patch changes files git treats as binary and --allow-binary was not given."""


def _binary_shown(run: RunRecord, head: str | None, allowed: bool) -> list[str]:
    """The lines that show the patch's binary changes as escaped text ([] when it has none).

    Raises:
        BinaryRefused: it has some and `allowed` is false.
    """
    changes = binary_files(run)
    if not changes:
        return []
    if not allowed:
        names = ", ".join(escape_unsafe(c.path) for c in changes)
        raise BinaryRefused(f"not applied: the patch changes {len(changes)} file(s) that git treats as binary "
                            f"({names}); their diff is encoded data you cannot review. To see each as text (every "
                            f"unsafe byte escaped) and then decide: harness apply {run.run_dir} --allow-binary")
    return describe_binary(run, changes, head or run.head)


def _target_line(run: RunRecord) -> str:
    """Which folder is patched and why that one: base.json's, or the --repo given instead."""
    if not run.explicit:
        return f"harness apply: folder to patch: {run.repo} (recorded in {run.run_dir / 'base.json'})"
    return f"harness apply: folder to patch: {run.repo} (given with --repo; the run recorded {run.recorded})"


def show_diff(patch: str, out: TextIO) -> None:
    """The patch, escaped line by line; added lines green and removed lines red on a terminal."""
    console = Console(file=out, soft_wrap=True)
    for line in patch.splitlines():
        style = ""
        if line.startswith("+") and not line.startswith("+++"):
            style = "green"
        elif line.startswith("-") and not line.startswith("---"):
            style = "red"
        elif line.startswith(("diff --git", "@@")):
            style = "bold" if line.startswith("diff") else "cyan"
        print_safe(console, line, style=style)


def _confirmed(run: RunRecord, yes: bool) -> bool:
    """True with --yes, or when the operator answers y/yes on a terminal; refused (said why) otherwise."""
    if yes:
        return True
    if not sys.stdin.isatty():
        print_safe(sys.stderr, f"harness apply: not applied: stdin is not a terminal to ask on; review the diff "
                               f"above and pass --yes to apply, e.g. harness apply {run.run_dir} --yes")
        return False
    # the prompt shares its line with the answer, so it is written escaped here rather than by print_safe
    sys.stderr.write(escape_unsafe(f"Apply this patch to {run.repo}? [y/N] "))
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() in ("y", "yes"):
        return True
    print_safe(sys.stderr, f"harness apply: not applied; {run.repo} is unchanged")
    return False


def _summary(done: Applied) -> None:
    if done.branch is not None:
        print_safe(sys.stdout, f"committed {len(done.files)} file(s) on the new branch {done.branch} "
                               f"({done.commit}) in {done.repo}; your files and index are unchanged. "
                               f"See it with: git -C {done.repo} show {done.branch} --stat")
    else:
        print_safe(sys.stdout, f"applied {len(done.files)} file(s) to {done.repo} (not staged, not committed): "
                               f"{', '.join(done.files)}")
