"""The one place where hostile values meet the host: validation and link-free file work.

Everything an input file (instances, predictions, task.json) or the model controls is hostile. A value
that becomes part of a path or a command-line argument passes one of the validators here first; a file
the harness writes or removes on the host goes through the functions here, which never follow a link.

Over 400 lines, one file on purpose: it is the whole host boundary, read in one place to audit it (a
hostile value checked before it becomes a path or an argument, a hostile tree walked without following
a link before a file in it is touched: `child` and the `*_beneath` family share that one walk); and the
kernel probe `_openat2_ok` lives beside `_openat2` in this module, where the tests and
bench/bench_beneath.py switch it to run both walks.

    commit(value, where)          a git commit: 7 to 40 hex digits, nothing else
    identifier(value, where)      a task or instance id: letters, digits, `_`, `.`, `-`; no `/`, no leading `.`/`-`
    requirement(value, where)     one pip requirement: name, extras, exact pin, marker; no options, paths or URLs
    child(root, rel)              `root/rel` for a relative path that stays inside `root` and crosses no link
                                  (through `lstat_beneath`, below)
    open_file(path, append=)      a descriptor for writing `path`: no symbolic link followed, no hard link shared
    write_file(path, data)        create or replace a file through open_file (0600 by default)
    private_dir(path)             a folder only its owner can read (0700), refused if it is a link
    refuse_links(folder)          refuse an output folder that holds a link anywhere (before writing into it)
    remove_tree(path, root)       remove `path` only if it is a real folder strictly inside `root`

Reading or writing inside a tree someone else controls (an operator's checkout, a task folder, a run
folder): `root` is trusted as given, and every component of `rel` below it is resolved without following
a symbolic link (magic links of /proc included) and never climbs with `..`:

    open_beneath(root, rel, flags)   a descriptor of `root/rel`
    dir_beneath(root, rel, create=)  a descriptor of the folder `root/rel` (made, 0755, if `create`)
    lstat_beneath(root, rel)         what `root/rel` is (a link there is reported, not followed)
    readlink_beneath(root, rel)      the target of the link `root/rel`
    read_beneath(root, rel, limit=)  the bytes of the regular file `root/rel`

They use openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) where the kernel has it
(Linux 5.6+) and otherwise open one component at a time (openat with O_NOFOLLOW from the folder already
open), so a link swapped in after a file was listed is refused too: each step holds the folder it
checked. A refusal is `LinkInPath` (an `UnsafePathError` naming the component); a missing file is
FileNotFoundError or NotADirectoryError as from os.open.

Validators raise `TaskError` (bad input: the value, what was expected, an example); file functions raise
`UnsafePathError`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import re
import secrets
import shutil
import stat
from pathlib import Path
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement

from harness.errors import TaskError, UnsafePathError

_COMMIT = re.compile(r"[0-9a-f]{7,40}")
_IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}")


def commit(value: object, where: str) -> str:
    """`value` if it is a git commit id (7 to 40 lowercase hex digits)."""
    if isinstance(value, str) and _COMMIT.fullmatch(value):
        return value
    raise TaskError(f"{where}: base_commit {value!r} is not a git commit id; expected 7 to 40 lowercase hex "
                    "digits, e.g. \"e3a3e6a4c8c6f0a1b2d3e4f5a6b7c8d9e0f1a2b3\"")


def identifier(value: object, where: str, field: str = "instance_id") -> str:
    """`value` if it can name a folder: letters, digits, `_`, `.`, `-` (at most 200), not starting with
    `.` or `-`."""
    if isinstance(value, str) and _IDENT.fullmatch(value):
        return value
    raise TaskError(f"{where}: {field} {value!r} cannot name a folder; expected letters, digits, '_', '.' "
                    "and '-' (starting with a letter or digit, at most 200), e.g. \"django__django-11099\"")


def child(root: Path, rel: str) -> Path:
    """`root / rel`, refused if `rel` is absolute, climbs with `..`, or crosses a symlink on the way
    (every existing component below `root` is resolved by `lstat_beneath`; `root` itself is trusted).
    A path to hand to code that takes paths; to read or write, use `open_beneath` (it holds what it
    checked)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or ".." in parts or not parts:
        raise UnsafePathError(f"path {rel!r} is not a relative path inside {root}; expected e.g. \"tests/test_x.py\"")
    joined = "/".join(parts)
    try:
        info = lstat_beneath(root, joined)
    except (FileNotFoundError, NotADirectoryError):
        info = None                              # not there (yet): nothing on the way is a link
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise LinkInPath(root, rel, joined, f"it ({joined}) is a symbolic link (links are never followed)")
    return Path(root).joinpath(*parts)


def open_file(path: Path, *, append: bool = False, mode: int = 0o600) -> int:
    """A descriptor writing to `path` (created `mode` if missing; emptied unless `append`). Refused, never
    followed, when `path` is a symbolic link; refused when it is not a regular file or shares its inode
    with another name (a hard link): what is written lands in this file and nowhere else."""
    # O_NONBLOCK: a fifo planted there fails at once (ENXIO) instead of hanging; no effect on files
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafePathError(f"refusing to write {path}: it is a symbolic link (to "
                                  f"{os.readlink(path)!r}); remove it or choose another output folder") from exc
        if exc.errno == errno.ENXIO:
            raise UnsafePathError(f"refusing to write {path}: it is not a regular file (a fifo or socket); "
                                  "remove it or choose another output folder") from exc
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(info.st_mode) else f"hard-linked ({info.st_nlink} names)"
        raise UnsafePathError(f"refusing to write {path}: it is {what}; remove it or choose another output folder")
    os.set_blocking(fd, True)
    if not append:
        os.ftruncate(fd, 0)
    return fd


def write_file(path: Path, data: str | bytes, mode: int = 0o600) -> None:
    """Create or replace `path` with `data`, whole: refused as `open_file` refuses (a link, a fifo, a hard
    link), then written to a new file beside it and renamed over it, so a reader (the web console
    following a run) sees the old content or the new, never half of it. The rename replaces the name
    itself: a link put there after the check is replaced, never followed."""
    path = Path(path)
    os.close(open_file(path, append=True, mode=mode))          # the checks, nothing written yet
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
            os.fchmod(out.fileno(), mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def private_dir(path: Path) -> Path:
    """`path` created if needed with mode 0700 (parents too); an existing link there is refused."""
    path = Path(path)
    if path.is_symlink():
        raise UnsafePathError(f"refusing folder {path}: it is a symbolic link to {os.readlink(path)!r}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def refuse_links(folder: Path) -> None:
    """Raise if `folder` is a link or holds a symbolic or hard link anywhere below it (an output folder
    about to be reused)."""
    folder = Path(folder)
    if folder.is_symlink():
        raise UnsafePathError(f"refusing output folder {folder}: it is a symbolic link; pass a real folder")
    for base, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            full = os.path.join(base, name)
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode) or (stat.S_ISREG(info.st_mode) and info.st_nlink > 1):
                what = "symbolic link" if stat.S_ISLNK(info.st_mode) else "hard link"
                raise UnsafePathError(f"refusing output folder {folder}: {full} is a {what} (outputs are "
                                      "never written through links); remove it or choose a new folder")


def remove_tree(path: Path, root: Path) -> None:
    """Remove the folder `path` if it exists, only when it is a real folder strictly inside `root`
    (after resolving `root`; `path` itself must not be a link)."""
    path, real_root = Path(path), Path(root).resolve()
    if not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_dir():
        raise UnsafePathError(f"refusing to remove {path}: it is not a real folder")
    real = path.resolve()
    if real == real_root or real_root not in real.parents:
        raise UnsafePathError(f"refusing to remove {path}: it resolves to {real}, outside {real_root}")
    shutil.rmtree(real)


_REQ_EXAMPLE = "\"pytest==8.3.5\" or \"tomli==2.0.1; python_version < '3.11'\""


def requirement(value: object, where: str, *, pinned: bool = True, direct_references: bool = False) -> str:
    """`value` normalised if it is one pip requirement: a name, optional `[extras]`, a version (with
    `pinned`: exactly one `==`/`===` without `*`) and an optional `; marker`. Never a pip option
    (`-i`, `--extra-index-url`, `-e`, `-r`), a path, or more than one line. A direct reference
    (`name @ URL`) only with `direct_references`, and then only to a wheel file over http(s) or file:
    a source distribution or a VCS link would run a build backend on the host."""
    text = value.strip() if isinstance(value, str) else None
    if text is None or not text or not text.isprintable() or text.startswith("-"):
        raise TaskError(f"{where}: requirement {value!r} is not a requirement; expected one line naming a "
                        f"package (no pip options such as -i, --extra-index-url, -e), e.g. {_REQ_EXAMPLE}")
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        said = str(exc).splitlines()[0]
        raise TaskError(f"{where}: requirement {value!r} is not a PEP 508 requirement ({said}); paths and pip "
                        f"options are not accepted; e.g. {_REQ_EXAMPLE}") from exc
    if req.url is not None:
        _direct_reference(req, value, where, direct_references)
    elif pinned and not (len(req.specifier) == 1 and next(iter(req.specifier)).operator in ("==", "===")
                         and "*" not in str(req.specifier)):
        raise TaskError(f"{where}: requirement {value!r} is not pinned; write name==version, e.g. {_REQ_EXAMPLE}")
    return str(req)


def _direct_reference(req: Requirement, value: object, where: str, allowed: bool) -> None:
    if not allowed:
        raise TaskError(f"{where}: requirement {value!r} is a direct reference (a URL instead of a version from "
                        "the package index); nothing is fetched from it. Pin an index version, e.g. "
                        f"{_REQ_EXAMPLE}, or, trusting the URL, run with --allow-direct-references")
    url = urlsplit(req.url or "")
    if url.scheme not in ("https", "http", "file") or not url.path.endswith(".whl"):
        raise TaskError(f"{where}: requirement {value!r} points to {req.url!r}, which is not a wheel file over "
                        "https, http or file; source distributions and VCS links are never built on the host. "
                        f"Build a wheel (in a network-less container) and point to it, e.g. \"{req.name} @ "
                        f"https://example.org/{req.name}-1.0-py3-none-any.whl\"")


class LinkInPath(UnsafePathError):
    """`rel` under `root` refused: `component` (the leading part of `rel` that was refused) is a symbolic
    link, or `rel` is not a plain relative path. `errno` is ELOOP for a link, EINVAL otherwise."""

    def __init__(self, root: object, rel: str, component: str, why: str, code: int = errno.ELOOP) -> None:
        super().__init__(f"refusing {rel!r} under {root}: {why}")
        self.root, self.rel, self.component, self.why, self.errno = root, rel, component, why, code


_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RESOLVE = 0x02 | 0x04 | 0x08          # RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine())   # one number on every modern arch
_openat2_ok: bool | None = None        # learnt on first use: the kernel (or a seccomp filter) may refuse it


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _parts(root: object, rel: str) -> list[str]:
    """The components of `rel`, refused when it is absolute, empty, holds NUL or climbs with `..`."""
    parts = [p for p in str(rel).split("/") if p not in ("", ".")]
    if str(rel).startswith("/") or not parts or "\0" in str(rel):
        raise LinkInPath(root, rel, str(rel), "it is not a relative path inside the folder; expected e.g. "
                         "\"src/app.py\"", errno.EINVAL)
    if ".." in parts:
        raise LinkInPath(root, rel, "..", "it is not a relative path inside the folder (it climbs with '..'); "
                         "expected e.g. \"src/app.py\"", errno.EINVAL)
    return parts


def _root_fd(root: Path | str | int) -> tuple[int, bool]:
    """A descriptor of the trusted `root` and whether it is ours to close."""
    if isinstance(root, int):
        return root, False
    return os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC), True


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, loaded once on first use (its `syscall` reaches openat2, which Python has no name for)."""
    return ctypes.CDLL(None, use_errno=True)


def _openat2(dirfd: int, rel: str, flags: int, mode: int) -> int | None:
    """openat2 beneath `dirfd` with no link followed; None when the kernel does not offer it."""
    global _openat2_ok
    if _openat2_ok is False or _SYS_OPENAT2 is None:
        return None
    libc = _libc()
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & (os.O_CREAT | os.O_TMPFILE) else 0, _RESOLVE)
    fd = int(libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dirfd), os.fsencode(rel),
                          ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how))))
    if fd >= 0:
        _openat2_ok = True
        return fd
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EPERM) or (code == errno.E2BIG and _openat2_ok is None):
        _openat2_ok = False
        return None
    _openat2_ok = True                         # the call exists: its answer is about the path
    raise OSError(code, os.strerror(code), rel)


def _step(root: object, rel: str, here: int, parts: list[str], i: int, create: bool, mode: int) -> int:
    """The folder `parts[i]` opened below `here` without following a link (made first if `create`)."""
    part = parts[i]
    try:
        return os.open(part, _DIR, dir_fd=here)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(part, mode, dir_fd=here)
        except FileExistsError:
            pass                                  # made meanwhile: opened (and checked) below
        return _step(root, rel, here, parts, i, False, mode)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            _refuse_link(root, rel, here, parts, i)
        raise


def _refuse_link(root: object, rel: str, here: int, parts: list[str], i: int) -> None:
    """Raise LinkInPath if `parts[i]` below the folder `here` is a symbolic link."""
    try:
        info = os.stat(parts[i], dir_fd=here, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode):
        component = "/".join(parts[:i + 1])
        where = "a folder on its path" if i < len(parts) - 1 else "it"
        raise LinkInPath(root, rel, component, f"{where} ({component}) is a symbolic link (links are never "
                         "followed)")


def _walk(root: object, rel: str, rootfd: int, parts: list[str], create: bool, mode: int) -> int:
    """The folder holding `parts[-1]`, reached one component at a time (no link followed)."""
    here = rootfd
    for i in range(len(parts) - 1):
        try:
            nxt = _step(root, rel, here, parts, i, create, mode)
        finally:
            if here != rootfd:
                os.close(here)
        here = nxt
    return here if here != rootfd else os.dup(rootfd)


def open_beneath(root: Path | str | int, rel: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor of `root/rel` (`os.open` flags and mode), no link followed in any component of `rel`.

    Raises:
        LinkInPath: a component is a symbolic link, or `rel` is absolute, empty or climbs with `..`.
        OSError: as from os.open (FileNotFoundError, NotADirectoryError, PermissionError, ...).
    """
    parts = _parts(root, rel)
    rootfd, ours = _root_fd(root)
    try:
        try:
            fd = _openat2(rootfd, "/".join(parts), flags, mode)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR, errno.EINVAL):
                raise
            fd = None                            # walked below to name the link (or raise what os.open says)
        if fd is not None:
            return fd
        parent = _walk(root, rel, rootfd, parts, False, 0o755)
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                _refuse_link(root, rel, parent, parts, len(parts) - 1)
            raise
        finally:
            os.close(parent)
    finally:
        if ours:
            os.close(rootfd)


def dir_beneath(root: Path | str | int, rel: str, *, create: bool = False, mode: int = 0o755) -> int:
    """An O_PATH descriptor of the folder `root/rel` ("" or "." is `root` itself), no link followed; with
    `create`, missing folders are made (`mode`). Raises as `open_beneath`."""
    if rel in ("", "."):
        rootfd, ours = _root_fd(root)
        return rootfd if ours else os.dup(rootfd)
    parts = _parts(root, rel)
    rootfd, ours = _root_fd(root)
    try:
        try:
            fd = _openat2(rootfd, "/".join(parts), os.O_PATH | os.O_DIRECTORY, 0)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR, errno.ENOENT, errno.EINVAL):
                raise
            fd = None                            # walked below: to name the link, or to make what is missing
        if fd is not None:
            return fd
        parent = _walk(root, rel, rootfd, parts, create, mode)
        try:
            return _step(root, rel, parent, parts, len(parts) - 1, create, mode)
        finally:
            os.close(parent)
    finally:
        if ours:
            os.close(rootfd)


def _in_parent(root: Path | str | int, rel: str) -> tuple[int, str]:
    head, _, name = "/".join(_parts(root, rel)).rpartition("/")
    return dir_beneath(root, head), name


def lstat_beneath(root: Path | str | int, rel: str) -> os.stat_result:
    """What `root/rel` is, without following a link: in its folders (refused) or itself (reported)."""
    parent, name = _in_parent(root, rel)
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)


def readlink_beneath(root: Path | str | int, rel: str) -> str:
    """The target of the symbolic link `root/rel` (its folders are not followed)."""
    parent, name = _in_parent(root, rel)
    try:
        return os.readlink(name, dir_fd=parent)
    finally:
        os.close(parent)


def read_beneath(root: Path | str | int, rel: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file `root/rel` (the first `limit` if given); a fifo or device is
    refused (`UnsafePathError`) without blocking on it. Raises as `open_beneath`."""
    fd = open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(f"refusing {rel!r} under {root}: it is not a regular file")
        return f.read() if limit is None else f.read(limit)
