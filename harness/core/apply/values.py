"""The values `harness apply` passes between its steps, and its two errors: a validated run folder
(`RunRecord`), a touched file that differs (`FileChange`), what was done (`Applied`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.errors import TaskError

Mode = Literal["git", "folder"]
How = Literal["changed", "deleted", "now exists", "is a symbolic link", "is not a regular file"]

PATCH_FILE, BASE_FILE = "patch.diff", "base.json"


class NothingToApply(TaskError):
    """The run changed nothing: its patch is empty and base.json lists no file. Not an error to the
    operator (`harness apply` says so and exits 0)."""


class PatchConflict(TaskError):
    """Refused: the folder (or the commit for `--branch`) does not hold what the run started from.
    `.changes` lists each file that differs and how (may be empty when git itself refused)."""

    def __init__(self, message: str, changes: tuple[FileChange, ...] = ()) -> None:
        super().__init__(message)
        self.changes = changes


@dataclass(frozen=True)
class FileChange:
    path: str
    how: How


@dataclass(frozen=True)
class RunRecord:
    """A run folder, validated: the folder to patch and what each touched file held at the start
    (`files[path]` is a SHA-256 hex digest, or None when the file did not exist)."""

    run_dir: Path
    repo: Path
    mode: Mode
    head: str | None
    files: dict[str, str | None]
    patch: str
    recorded: Path | None = None
    """The folder base.json names (`repo` is it unless `--repo` said otherwise)."""
    explicit: bool = False
    """Whether `repo` was named by the caller (`--repo`) rather than taken from base.json."""


@dataclass(frozen=True)
class Applied:
    """What `harness apply` did: the files written in `repo`, or the `branch` and `commit` made."""

    repo: Path
    files: tuple[str, ...]
    branch: str | None = None
    commit: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"applied": True, "repo": str(self.repo), "files": list(self.files),
                "where": "branch" if self.branch else "working tree", "branch": self.branch, "commit": self.commit}

