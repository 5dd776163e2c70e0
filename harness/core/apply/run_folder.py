"""Reading a run folder: its patch.diff and base.json, validated and cross-checked (the paths the patch
touches, as unidiff and as `git apply` read them, are exactly base.json's `files`), and the folder to
patch, which must be reached through no link and, for a git run, hold the recorded HEAD commit."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import cast, get_args

from unidiff.patch import PatchSet

from harness import checks
from harness.core import hostgit
from harness.core.apply._git import find_place, rev, said
from harness.core.apply.diff_paths import patch_paths
from harness.core.apply.values import BASE_FILE, PATCH_FILE, Mode, NothingToApply, RunRecord
from harness.errors import TaskError, UnsafePathError

_RUN_HINT = ("RUN_DIR must be the --out folder of a `harness run --repo` run, e.g. harness apply "
             "runs/shop-20260101-120000")
_BASE_EXAMPLE = ('{"version": 1, "repo": "/home/me/code/shop", "mode": "git", "head": "<40 hex digits or '
                 'null>", "files": {"shop/cart.py": "<64 hex digits>", "shop/new.py": null}}')
_HEX40, _HEX64 = re.compile(r"[0-9a-f]{40}"), re.compile(r"[0-9a-f]{64}")


def load_run(run_dir: Path, repo: Path | None = None) -> RunRecord:
    """The run in `run_dir`, to be applied to `repo` (default: the folder base.json names, which must
    be reached through no link and, for a git run, hold the recorded HEAD commit: a run folder from
    elsewhere cannot point `harness apply` at another repository).

    Raises:
        NothingToApply: the run changed nothing (empty patch, no file listed).
        TaskError: a run file is missing or malformed, the folder is not usable (or not a checkout of
            the run's repository), or the patch touches a path that is unsafe or not the set base.json lists.
        UnsafePathError: the run folder, a run file or the folder to patch is a symbolic link.
    """
    run_dir = Path(run_dir)
    if run_dir.is_symlink():
        raise UnsafePathError(f"refusing run folder {run_dir}: it is a symbolic link; pass the real folder "
                              f"({os.path.realpath(run_dir)})")
    if not run_dir.is_dir():
        raise TaskError(f"run folder {str(run_dir)!r} does not exist; {_RUN_HINT}")
    recorded, mode, head, files = _parse_base(_read_run_file(run_dir, BASE_FILE), run_dir / BASE_FILE)
    patch = _read_run_file(run_dir, PATCH_FILE)
    if not patch.strip() and not files:
        raise NothingToApply(f"nothing to apply: the run in {run_dir} changed nothing ({PATCH_FILE} is empty); "
                             f"{recorded} is unchanged")
    if not patch.strip():
        raise TaskError(f"{run_dir / PATCH_FILE} is empty but {run_dir / BASE_FILE} lists {sorted(files)}; "
                        f"both must come from the same `harness run --repo` run")
    target = Path(repo) if repo is not None else Path(recorded)
    if target.is_symlink():
        raise UnsafePathError(f"refusing folder {target}: it is a symbolic link; pass the real folder, e.g. "
                              f"--repo {os.path.realpath(target)}")
    if not target.is_dir():
        raise TaskError(f"the folder to patch {str(target)!r} does not exist or is not a folder; pass the "
                        "project's folder, e.g. harness apply RUN_DIR --repo ~/code/shop")
    if repo is None:
        _check_recorded(target, mode, head, run_dir)
    _cross_check(patch, files, run_dir)
    return RunRecord(run_dir, target.absolute(), mode, head, files, patch, Path(recorded), repo is not None)


def _check_recorded(target: Path, mode: Mode, head: str | None, run_dir: Path) -> None:
    """The folder base.json names is reached through no link and, for a git run with a HEAD, is a
    checkout holding that commit; anything else needs `--repo` to say so."""
    override = f"to apply there anyway, say so: harness apply {run_dir} --repo {target}"
    if os.path.realpath(target) != str(target):
        raise UnsafePathError(f"refusing {target} (named by {run_dir / BASE_FILE}): it is reached through a "
                              f"symbolic link (it resolves to {os.path.realpath(target)}); {override}")
    if mode != "git" or head is None:
        return
    place = find_place(target)
    if not place.in_git:
        raise TaskError(f"refusing {target} (named by {run_dir / BASE_FILE}): the run started from commit "
                        f"{head[:12]} of a git checkout, and {target} is not a git checkout; {override}")
    if rev(place.cwd, f"{head}^{{commit}}") is None:
        raise TaskError(f"refusing {target} (named by {run_dir / BASE_FILE}): the run started from commit "
                        f"{head[:12]}, which is not in {target}'s repository: it is a checkout of another "
                        f"project; {override}")


def _read_run_file(run_dir: Path, name: str) -> str:
    path = run_dir / name
    try:
        data = checks.read_beneath(run_dir, name)
    except FileNotFoundError:
        raise TaskError(f"{path} is missing; {_RUN_HINT}") from None
    except checks.LinkInPath as exc:
        raise UnsafePathError(f"refusing {path}: it is a symbolic link (run files are never followed)") from exc
    except UnsafePathError:
        raise TaskError(f"{path} is not a regular file; {_RUN_HINT}") from None
    except OSError as exc:
        raise TaskError(f"{path} could not be read: {exc}; {_RUN_HINT}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path} is not UTF-8 text ({exc}); {_RUN_HINT}") from exc


def _parse_base(text: str, where: Path) -> tuple[str, Mode, str | None, dict[str, str | None]]:
    """base.json's repo, mode, head and files, every violation reported at once."""
    try:
        base = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskError(f"{where} is not JSON ({exc}); expected e.g. {_BASE_EXAMPLE}") from exc
    if not isinstance(base, dict):
        raise TaskError(f"{where} holds {type(base).__name__}, not an object; expected e.g. {_BASE_EXAMPLE}")
    problems = [f"unknown key {k!r}" for k in sorted(set(base) - {"version", "repo", "mode", "head", "files"})]
    if base.get("version") != 1:
        problems.append(f"version is {base.get('version')!r}, expected 1")
    repo = base.get("repo")
    if not (isinstance(repo, str) and os.path.isabs(repo) and "\0" not in repo):
        problems.append(f"repo is {repo!r}, expected an absolute path")
    if base.get("mode") not in get_args(Mode):
        problems.append(f"mode is {base.get('mode')!r}, expected \"git\" or \"folder\"")
    head = base.get("head")
    if not (head is None or (isinstance(head, str) and _HEX40.fullmatch(head))):
        problems.append(f"head is {head!r}, expected 40 lowercase hex digits or null")
    files = base.get("files")
    if not isinstance(files, dict):
        problems.append(f"files is {files!r}, expected an object mapping each touched path to its SHA-256 or null")
    else:
        problems += [f"files[{k!r}] is {v!r}, expected 64 lowercase hex digits or null" for k, v in files.items()
                     if not (v is None or (isinstance(v, str) and _HEX64.fullmatch(v)))]
    if problems:
        raise TaskError(f"{where} is malformed: {'; '.join(problems)}. Expected e.g. {_BASE_EXAMPLE}")
    return cast(str, repo), cast(Mode, base["mode"]), cast("str | None", head), cast("dict[str, str | None]", files)


def _cross_check(patch: str, files: dict[str, str | None], run_dir: Path) -> None:
    """The patch's paths, as unidiff and as git read them, are exactly base.json's `files`."""
    paths = set(patch_paths(patch))
    listed = set(files)
    if paths != listed:
        raise TaskError(f"{run_dir / PATCH_FILE} and {run_dir / BASE_FILE} disagree: the patch touches "
                        f"{sorted(paths - listed)} that base.json does not list, and base.json lists "
                        f"{sorted(listed - paths)} that the patch does not touch; expected the same paths. "
                        f"Both must come from the same `harness run --repo` run")
    proc = hostgit.in_folder(Path(tempfile.gettempdir()), ["apply", "--numstat", "-z", "-"], stdin=patch.encode())
    if proc.returncode != 0:
        raise TaskError(f"git cannot read {run_dir / PATCH_FILE}: {said(proc)}; expected a patch made by "
                        "`git diff` (`diff --git a/x b/x` headers followed by @@ hunks)")
    seen = [f.split("\t", 2)[2] for f in proc.stdout.decode("utf-8", "surrogateescape").split("\0")
            if f.count("\t") >= 2]
    entries = len(PatchSet(patch))
    if len(seen) != entries or not set(seen) <= paths:
        raise TaskError(f"git reads {run_dir / PATCH_FILE} differently ({len(seen)} file(s): {sorted(seen)}) "
                        f"than the diff parser ({entries} file(s): {sorted(paths)}); refusing an ambiguous patch")

