"""Where the web console finds runs and evaluations: the numbered roots, the walk below them (at most
`MAX_DEPTH` folders down, links never followed, at most `MAX_ENTRIES` entries of a folder looked at),
and what kind of folder each is, from the names it holds (`folder_kind`).

A run is a folder holding `trajectory.jsonl`, `result.json` or `done`; an evaluation is a folder
holding `run.json` and `report.json` or `instances/`. A run or evaluation is named in URLs by its
root's number and its path below that root (`0/demo-...`), resolved with `checks.child`, which
refuses `..`, absolute paths and links on the way.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from harness import checks
from harness.errors import UnsafePathError
from harness.outputs import recorded_outputs
from harness.web.records import NotFound

MAX_DEPTH = 3
MAX_ENTRIES = 100_000         # entries of one folder looked at (a listing costs memory and time per entry)
LIVE_SECONDS = 120            # a run or evaluation unfinished but changed this recently is "running"


@dataclass
class Roots:
    """The folders the console shows, numbered in the order given; with `state_dir`, each output
    folder `harness run`/`eval` records there (`harness.outputs`) and that is not below a root is added
    as a root of its own when the list is read, numbered after the others (numbers never change)."""
    paths: list[Path]
    state_dir: Path | None = None
    max_entries: int = MAX_ENTRIES        # entries of one folder looked at
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def refresh(self) -> None:
        if self.state_dir is None:
            return
        recorded = recorded_outputs(self.state_dir)
        with self._lock:
            for folder in recorded:
                if not any(folder == p or folder.is_relative_to(p) for p in self.paths):
                    self.paths.append(folder)

    def resolve(self, ref: str) -> Path:
        """The folder named `ref` ("N/path/below/root"), refused when it climbs out or crosses a link."""
        number, _, rel = ref.partition("/")
        if number.isdigit() and int(number) >= len(self.paths):
            self.refresh()
        if not number.isdigit() or int(number) >= len(self.paths):
            raise NotFound(f"no run {ref!r}: expected ROOT/PATH with ROOT one of 0..{len(self.paths) - 1}, "
                           "e.g. \"0/demo-20261201-101500\"")
        root = self.paths[int(number)]
        if not rel:
            return root
        try:
            folder = checks.child(root, rel)
        except UnsafePathError as exc:
            raise NotFound(str(exc)) from exc
        if not folder.is_dir() or folder.is_symlink():
            raise NotFound(f"no run {ref!r}: {folder} is not a folder")
        return folder

    def walk(self, cut: list[str] | None = None) -> Iterator[tuple[str, Path, str]]:
        """(ref, folder, kind) of every run and evaluation below the roots (or a root that is one itself,
        such as a recorded output folder); kind "run" or "eval". A folder of more than `max_entries`
        entries is looked at for that many only, said in `cut`."""
        cut = [] if cut is None else cut
        self.refresh()
        for number, root in enumerate(self.paths):
            if not root.is_dir() or root.is_symlink():
                continue
            kind = folder_kind(root)
            if kind is not None:
                yield str(number), root, kind
            else:
                yield from _walk(root, str(number), 0, cut, self.max_entries)


def folder_kind(folder: Path) -> str | None:
    """"eval", "run" or None, from the names the folder holds (looked up one by one, never listed)."""
    if _has(folder, "run.json") and (_has(folder, "report.json") or _has(folder, "instances")):
        return "eval"
    if any(_has(folder, name) for name in ("trajectory.jsonl", "result.json", "done")):
        return "run"       # an agent session, or an evaluation's instance (graded predictions have no session)
    return None


def _has(folder: Path, name: str) -> bool:
    try:
        os.lstat(folder / name)
    except OSError:
        return False
    return True


def _entries(folder: Path, cut: list[str], limit: int) -> list[os.DirEntry[str]]:
    """The folder's first `limit` entries, by name (more are said in `cut`); none when unreadable."""
    try:
        with os.scandir(folder) as scan:
            entries = list(islice(scan, limit + 1))
    except OSError:
        return []
    if len(entries) > limit:
        cut.append(f"{folder} holds more than {limit:,} entries: {limit:,} of them are looked at")
        entries = entries[:limit]
    return sorted(entries, key=lambda e: e.name)


def folder_names(folder: Path, cut: list[str], limit: int) -> set[str]:
    return {e.name for e in _entries(folder, cut, limit)}


def _walk(folder: Path, ref: str, depth: int, cut: list[str], limit: int) -> Iterator[tuple[str, Path, str]]:
    for entry in _entries(folder, cut, limit):
        if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
            continue
        path, child_ref = Path(entry.path), f"{ref}/{entry.name}"
        kind = folder_kind(path)
        if kind is not None:
            yield child_ref, path, kind
        elif depth + 1 < MAX_DEPTH:
            yield from _walk(path, child_ref, depth + 1, cut, limit)


def mtime(path: Path) -> float | None:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return None
