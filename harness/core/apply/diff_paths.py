"""The paths a run's patch touches, each checked to be a plain relative path inside the folder (both
sides of a rename, git's C-style quoting undone); symbolic links and submodules in the patch refused."""

from __future__ import annotations

import os
import re

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from harness.errors import TaskError

_ODD_MODE = re.compile(r"\b(120000|160000)\b")   # a symbolic link or a submodule in a git header line
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(name: str) -> str:
    """A file name from a diff header, with git's C-style quoting ("a/\\303\\251.txt") undone."""
    if not (len(name) >= 2 and name.startswith('"') and name.endswith('"')):
        return name
    out, body, i = bytearray(), name[1:-1], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1:i + 4].isdigit() and len(body[i + 1:i + 4]) == 3:
            out.append(int(body[i + 1:i + 4], 8) & 0xFF)
            i += 4
        elif body[i + 1:i + 2] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        else:
            raise TaskError(f"the patch names a file {name!r} with an unknown escape; expected git's quoting, "
                            "e.g. \"a/caf\\303\\251.py\"")
    return out.decode("utf-8", "surrogateescape")


def patch_paths(patch: str) -> list[str]:
    """The paths a unified diff touches (both sides of a rename), unquoted and without a/ b/, each
    checked to be a plain relative path; symbolic links and submodules in the patch are refused.

    Raises:
        TaskError: not a unified diff, or an unsafe path or file type (every offender listed).
    """
    try:
        parsed = PatchSet(patch)
    except UnidiffParseError as exc:
        raise TaskError(f"the patch is not a unified diff ({exc}); expected `diff --git a/x b/x` headers "
                        "followed by @@ hunks, as `git diff` writes them") from exc
    paths: list[str] = []
    problems: list[str] = []
    for item in parsed:
        if any(_ODD_MODE.search(line) for line in item.patch_info or ()):
            problems.append(f"{item.path!r} is a symbolic link or a submodule (only regular files are applied)")
        for name in (item.source_file, item.target_file):
            if name and name != "/dev/null":
                rel = _unquote(name)
                rel = rel[2:] if rel.startswith(("a/", "b/")) else rel
                why = _unsafe_path(rel)
                if why:
                    problems.append(f"{rel!r} {why}")
                elif rel not in paths:
                    paths.append(rel)
    if problems:
        raise TaskError(f"refusing the patch: {'; '.join(problems)}. Only relative paths inside the folder are "
                        "applied, e.g. \"shop/cart.py\"")
    if not paths:
        raise TaskError("the patch touches no file; expected `diff --git a/x b/x` headers followed by @@ hunks")
    return sorted(paths)


def _unsafe_path(rel: str) -> str | None:
    parts = rel.split("/")
    if rel.startswith("/") or os.path.isabs(rel):
        return "is absolute"
    if ".." in parts:
        return "climbs out with '..'"
    if rel.startswith("-"):
        return "starts with '-'"
    if any(p.lower() == ".git" for p in parts):
        return "is inside .git"
    if "" in parts or "." in parts or any(ord(c) < 32 or c == "\x7f" for c in rel):
        return "is not a plain path (empty or '.' component, or a control character)"
    return None

