"""Git for the apply modules: where git runs for a folder (the checkout's top and the folder's prefix in
it), and `git ARGS` through `core.hostgit` with the harness's identity."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.core import hostgit
from harness.core.sources import GIT_IDENTITY
from harness.errors import TaskError


@dataclass(frozen=True)
class Place:
    """Where git runs for `repo`: the checkout's top folder and `repo`'s prefix in it ("" outside git)."""

    cwd: Path
    prefix: str
    in_git: bool

    def directory(self) -> list[str]:
        return [f"--directory={self.prefix}"] if self.prefix else []


def find_place(repo: Path) -> Place:
    found = hostgit.find_checkout(repo)
    if found is None:
        return Place(repo, "", False)
    if found.top is None:
        raise TaskError(f"{repo} is inside a .git folder; pass the project's folder, e.g. --repo ~/code/shop")
    return Place(found.top, found.prefix, True)


def rev(cwd: Path, spec: str) -> str | None:
    proc = git(["rev-parse", "--verify", "-q", spec], cwd)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def git(args: list[str], cwd: Path, stdin: bytes = b"", env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[bytes]:
    """`git ARGS` in `cwd` through the harness's view of the repository holding it (`core.hostgit`: git
    reads no config of the repository's, so it runs no program the repository names), with the
    harness's identity."""
    return hostgit.in_repository(cwd, args, stdin=stdin, env={**GIT_IDENTITY, **(env or {})})


def said(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stderr.decode("utf-8", "replace").strip()[:1000] or f"exit status {proc.returncode}"

