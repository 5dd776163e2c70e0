"""The one path check every file tool goes through.

A path the model gives is taken relative to the workspace (`sandbox.api.WORKDIR`); absolute paths
are accepted when they stay inside it. `..` components are refused outright, so a path never
climbs out lexically. Symlinks are checked after resolution inside the sandbox: `check_resolved`
refuses a real path that lands outside the allowed roots. The only other place a tool may *read*
is `OUTPUT_DIR`, where the shell saves the full output of a command it truncated.
"""

from __future__ import annotations

import posixpath
import shlex

from harness.errors import PathError
from sandbox.api import OUTPUT_DIR, WORKDIR, Sandbox

WRITE_ROOTS: tuple[str, ...] = (WORKDIR,)
READ_ROOTS: tuple[str, ...] = (WORKDIR, OUTPUT_DIR)


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root + "/") for root in roots)


def confine(path: str, *, for_write: bool = False) -> str:
    """The absolute, normalised path inside the sandbox for `path`, or PathError.

    `for_write` restricts the roots to the workspace; reads may also reach OUTPUT_DIR.
    """
    roots = WRITE_ROOTS if for_write else READ_ROOTS
    text = path.strip()
    if not text:
        raise PathError(f"the path is empty; expected a file path relative to {WORKDIR}, "
                        "e.g. \"pkg/module.py\"")
    if "\x00" in text:
        raise PathError(f"the path {path!r} contains a NUL byte; expected a plain file path, "
                        "e.g. \"pkg/module.py\"")
    if ".." in text.split("/"):
        raise PathError(f"the path {path!r} contains '..', which is not allowed; give the path "
                        f"from the project root instead, e.g. \"pkg/module.py\" for {WORKDIR}/pkg/module.py")
    absolute = posixpath.normpath(text if text.startswith("/") else posixpath.join(WORKDIR, text))
    if not _inside(absolute, roots):
        where = " or ".join(roots)
        raise PathError(f"the path {path!r} is outside {where}; tools only reach the project's "
                        f"files, e.g. \"pkg/module.py\" or \"{WORKDIR}/pkg/module.py\"")
    return absolute


def check_resolved(requested: str, realpath: str, *, for_write: bool = False) -> str:
    """Refuse `realpath` (the sandbox's resolution of `requested`) if a symlink led it outside."""
    roots = WRITE_ROOTS if for_write else READ_ROOTS
    if not _inside(posixpath.normpath(realpath), roots):
        raise PathError(f"the path {requested!r} is a symlink (or goes through one) that leads to "
                        f"{realpath!r}, outside {' or '.join(roots)}; only the project's own files can be "
                        f"{'changed' if for_write else 'read'}, e.g. \"pkg/module.py\"")
    return realpath


def resolve_in_sandbox(sandbox: Sandbox, path: str, *, for_write: bool = False) -> str:
    """`confine` plus symlink resolution by the sandbox, for paths that may not exist yet."""
    absolute = confine(path, for_write=for_write)
    result = sandbox.exec(f"realpath -m -- {shlex.quote(absolute)}", timeout=10, save_output=False)
    real = result.stdout.text.strip()
    if not result.ok or not real:
        raise PathError(f"could not resolve the path {path!r} in the sandbox "
                        f"(exit {result.exit_code}: {result.stderr.text.strip()[:200]})")
    return check_resolved(path, real, for_write=for_write)


def display(path: str) -> str:
    """How a path is shown to the model: relative to the workspace when inside it."""
    if path.startswith(WORKDIR + "/"):
        return path[len(WORKDIR) + 1:]
    return path
