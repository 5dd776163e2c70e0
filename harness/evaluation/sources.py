"""Project sources on the host: tarballs, git clones, patches.

Everything here works on the host, on copies: a task's own files are never modified. Patches are
applied as SWE-bench does (``git apply``, then ``patch --fuzz`` as a fallback, only after its dry run
passed, so a failed patch leaves no half-applied files), with git's repository discovery stopped at
the target folder so an enclosing repository is never touched.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from harness.errors import TaskError


def cache_dir() -> Path:
    """Where wheelhouses and extracted sources are kept (the user's cache folder for harness)."""
    from platformdirs import user_cache_dir
    return Path(user_cache_dir("harness"))


def task_repo_dir(task_path: Path) -> Path:
    """The project folder of a task directory: repo/, or repo.tar.gz extracted once into the cache."""
    if (task_path / "repo").is_dir():
        return task_path / "repo"
    tarball = task_path / "repo.tar.gz"
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()[:16]
    dest = cache_dir() / "sources" / f"{task_path.name}-{digest}"
    if not dest.is_dir():
        extract_tarball(tarball, dest)
    return dest


def extract_tarball(tarball: Path, dest: Path) -> None:
    """Extract `tarball` into `dest`, dropping a single top folder; refuses unsafe members."""
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
    except (tarfile.TarError, OSError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise TaskError(f"cannot extract {tarball}: {exc}; expected a .tar.gz of the project's files "
                        "at the base commit, e.g. made with `git archive --format=tar.gz HEAD`") from exc
    entries = list(tmp.iterdir())
    root = entries[0] if len(entries) == 1 and entries[0].is_dir() else tmp
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(dest, ignore_errors=True)
    root.rename(dest)
    shutil.rmtree(tmp, ignore_errors=True)


def checkout_commit(clone: Path, commit: str, dest: Path) -> None:
    """Write the tree of `commit` in the git clone `clone` into `dest` (no .git folder)."""
    proc = subprocess.run(["git", "-C", str(clone), "archive", "--format=tar", commit],
                          capture_output=True, timeout=600)
    if proc.returncode != 0:
        raise TaskError(f"git clone {clone} does not contain base_commit {commit!r}: "
                        f"{proc.stderr.decode(errors='replace').strip()}; fetch it first, e.g. "
                        f"`git -C {clone} fetch origin {commit}`")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(dest, filter="data")


@dataclass(frozen=True)
class PatchOutcome:
    applied: bool
    output: str      # what git apply / patch said


def apply_patch(root: Path, patch: str) -> PatchOutcome:
    """Apply the unified diff `patch` to the files under `root`."""
    if not patch.strip():
        return PatchOutcome(True, "empty patch: nothing to apply")
    data = patch if patch.endswith("\n") else patch + "\n"
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(root.resolve().parent)}
    attempts = [["git", "apply", "--verbose", "--whitespace=nowarn", "-"],
                ["patch", "--batch", "--fuzz=5", "-p1", "--forward", "--no-backup-if-mismatch",
                 "--reject-file=-", "--dry-run"]]
    said = []
    for cmd in attempts:
        if shutil.which(cmd[0]) is None:
            continue
        proc = _run(cmd, data, root, env)
        said.append(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}".rstrip())
        if proc.returncode == 0 and cmd[-1] == "--dry-run":
            proc = _run(cmd[:-1], data, root, env)    # the dry run passed: apply for real
            said.append(f"$ {' '.join(cmd[:-1])}\n{proc.stdout}{proc.stderr}".rstrip())
        if proc.returncode == 0:
            return PatchOutcome(True, "\n".join(said))
    return PatchOutcome(False, "\n".join(said))


def _run(cmd: list[str], data: str, root: Path, env: dict[str, str]) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(cmd, input=data, text=True, cwd=root, env=env, capture_output=True, timeout=120)


def patched_files(patch: str, existing_only: bool = False) -> list[str]:
    """The paths (relative to the project root) a unified diff touches, before and after; with
    `existing_only`, only the files it modifies or deletes (not those it creates)."""
    from unidiff import PatchSet
    try:
        patch_set = PatchSet.from_string(patch)
    except Exception as exc:  # noqa: BLE001 - unidiff raises several exception types
        raise TaskError(f"not a unified diff ({exc}); expected `diff --git a/x b/x` / `--- a/x` "
                        "`+++ b/x` headers followed by @@ hunks") from exc
    paths: list[str] = []
    for f in patch_set:
        if existing_only and f.is_added_file:
            continue
        for name in (f.source_file,) if existing_only else (f.source_file, f.target_file):
            if name and name != "/dev/null":
                rel = name[2:] if name[:2] in ("a/", "b/") else name
                if rel not in paths:
                    paths.append(rel)
    return paths
