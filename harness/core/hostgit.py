"""Git on the host, one way: git never reads a configuration the harness did not write.

Git runs programs named by its configuration (filter, diff, merge and gpg drivers, editors, pagers,
askpass, credential helpers, ssh commands and proxies, promisor remotes fetched lazily through any
transport, fsmonitor, hooks, submodule update commands) and by the attributes that select those drivers.
Keys cannot be switched off one by one: `include.path`, `includeIf` and the next release's new key get
past any list. So a repository the harness did not make (the operator's checkout, a task's folder, an
instance's clone, a mirror) is never git's repository here. Every git call on the host goes through a
*view*: a private git directory the harness writes, which holds

    config          harness-written only: format and a few boolean/enum keys carried over after
                    validation (`core.filemode`, `core.autocrlf`, ...); no driver, no hook path, no remote,
                    `protocol.allow=never`, `core.attributesFile=/dev/null`, fsmonitor off
    info/attributes `* !filter !diff !merge`: no attribute in the tree selects a driver (none is defined anyway)
    info/exclude    a copy of the repository's (patterns only)
    HEAD            a copy of the repository's
    refs, packed-refs, reftable, shallow, index, sharedindex.*   symbolic links to the repository's

and git is started with `GIT_DIR` set to it, `GIT_OBJECT_DIRECTORY` set to the repository's objects (so
objects and refs written by `harness apply --branch` land in the operator's repository) and
`GIT_WORK_TREE` to its work tree; `GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`,
`GIT_ATTR_NOSYSTEM=1`, `HOME` and `XDG_CONFIG_HOME` pointing into the view, `GIT_NO_LAZY_FETCH=1`,
`GIT_NO_REPLACE_OBJECTS=1`, and no other `GIT_*` variable of the caller's. The repository's own config,
worktree config, includes, hooks and `info/attributes` are never opened by git. With no promisor remote
in the config git reads, a missing object is an error, never a fetch (on any git version).

    find_checkout(path)    where the repository of `path` is (found as git finds it, without running git)
    view(path)             the view of the checkout holding `path`, or of the git directory `path`
    scratch()              a view of an empty repository the harness made (git commands that need no
                           repository, and repositories the harness fills itself)
    remote_git(args)       clone/fetch from an operator-given URL into a harness-made bare clone: the
                           operator's own config is read (credentials, proxies), transports are limited
                           to https, http, ssh, git and file (never `ext::`), no prompt, no lazy fetch

Raises `TaskError` for a repository the views cannot serve (an unknown format, a `core.worktree`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.errors import TaskError

REMOTE_PROTOCOLS = "https:http:ssh:git:file"
"""Transports a clone or fetch from an operator-given URL may use; never `ext::` (a command)."""
NEUTRAL_ATTRIBUTES = "* !filter !diff !merge\n"
_CARRIED_BOOL = ("core.filemode", "core.symlinks", "core.ignorecase", "core.precomposeunicode",
                 "core.checkroundtripencoding", "core.protecthfs", "core.protectntfs")
_CARRIED_ENUM = {"core.autocrlf": ("true", "false", "input"), "core.eol": ("lf", "crlf", "native"),
                 "core.safecrlf": ("true", "false", "warn")}
_TRUE, _FALSE = ("true", "yes", "on", "1", ""), ("false", "no", "off", "0")
_HEAD = re.compile(r"(ref: refs/[^\0\n]+|[0-9a-f]{40}|[0-9a-f]{64})\n?")
_MAX_SMALL = 1 << 20


@dataclass(frozen=True)
class Checkout:
    """A repository found for a path: its work tree (None for a bare repository or a path inside a git
    directory), its git directory (a linked worktree's own one), the common git directory, and the
    path's prefix inside the work tree ("" at the top, or without a work tree)."""

    top: Path | None
    git_dir: Path
    common_dir: Path
    prefix: str


def _is_git_dir(d: Path) -> bool:
    common = _common_dir(d)
    return (d / "HEAD").is_file() and (common / "objects").is_dir() and (common / "refs").is_dir()


def _common_dir(d: Path) -> Path:
    try:
        text = _read_small(d / "commondir").strip()
    except OSError:
        return d
    return Path(os.path.realpath(d / text))


def _read_small(path: Path) -> str:
    with open(path, "rb") as f:
        return f.read(_MAX_SMALL).decode("utf-8", "surrogateescape")


def _gitfile(dotgit: Path) -> Path | None:
    try:
        text = _read_small(dotgit)
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    target = Path(os.path.realpath(dotgit.parent / text[len("gitdir: "):].strip()))
    return target if _is_git_dir(target) else None


def find_checkout(path: Path) -> Checkout | None:
    """The repository git would find from `path` (walking up, stopping at a filesystem boundary as git
    does), read without running git; None when there is none or the `.git` found is not valid."""
    here = Path(os.path.realpath(path))
    try:
        device, start = here.stat().st_dev, here
    except OSError:
        return None
    while True:
        dotgit = here / ".git"
        git_dir = dotgit if dotgit.is_dir() and _is_git_dir(dotgit) else _gitfile(dotgit) if dotgit.is_file() else None
        if git_dir is not None or dotgit.exists():
            if git_dir is None:
                return None
            prefix = start.relative_to(here).as_posix()
            return Checkout(here, Path(os.path.realpath(git_dir)), _common_dir(git_dir),
                            "" if prefix == "." else prefix + "/")
        if _is_git_dir(here):
            return Checkout(None, here, _common_dir(here), "")
        parent = here.parent
        if parent == here or parent.stat().st_dev != device:
            return None
        here = parent


@dataclass(frozen=True)
class GitView:
    """A harness-made git directory over a repository (see the module docstring). `run` is the only way
    to start git on it; `checkout` is None for a `scratch` view."""

    dir: Path
    checkout: Checkout | None
    env: Mapping[str, str]
    promisor: bool = False

    def run(self, args: Sequence[str], *, cwd: Path | None = None, stdin: bytes = b"",
            env: Mapping[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
        """`git ARGS` in `cwd` (default: the work tree's top, else the view) with the view's environment
        plus `env` (the caller's index file, identity and dates, a scratch repository's work tree)."""
        where = cwd or (self.checkout.top if self.checkout and self.checkout.top else self.dir)
        return subprocess.run(["git", *args], cwd=where, input=stdin, capture_output=True, timeout=timeout,
                              env={**self.env, **(env or {})})

    def popen(self, args: Sequence[str]) -> subprocess.Popen[bytes]:
        """`git ARGS` started with the view's environment, its output to be read from `.stdout`."""
        return subprocess.Popen(["git", *args], cwd=self.dir, env=dict(self.env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)

    def said(self, proc: subprocess.CompletedProcess[bytes]) -> str:
        """What git said on stderr, with why an object may be missing in a partial clone."""
        text = proc.stderr.decode("utf-8", "replace").strip()[:1000] or f"exit status {proc.returncode}"
        if self.promisor and proc.returncode != 0:
            text += (" (the repository is a partial clone: objects it lacks are never fetched by the harness, "
                     "because that fetch runs whatever its config names; fetch them yourself first, e.g. "
                     "`git fetch --refetch origin` or `git checkout` of the files)")
        return text


def _base_env(view_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_DIR": str(view_dir), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
                "GIT_ATTR_NOSYSTEM": "1", "GIT_NO_LAZY_FETCH": "1", "GIT_NO_REPLACE_OBJECTS": "1",
                "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "GIT_EDITOR": "false", "GIT_OPTIONAL_LOCKS": "0",
                "GIT_PROTOCOL_FROM_USER": "0", "GIT_ALLOW_PROTOCOL": "", "HOME": str(view_dir),
                "XDG_CONFIG_HOME": str(view_dir)})
    return env


def _operator_excludes() -> str | None:
    """The operator's own ignore file (core.excludesFile of their global config, else git's default
    ~/.config/git/ignore), read as patterns; nothing else of their config is used on a repository."""
    return _excludes_of(os.environ.get("HOME", ""), os.environ.get("XDG_CONFIG_HOME", ""))


@functools.lru_cache(maxsize=8)
def _excludes_of(home: str, xdg_config: str) -> str | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    with tempfile.TemporaryDirectory(prefix="harness-git-") as tmp:
        proc = subprocess.run(["git", "config", "--global", "--path", "--get", "core.excludesFile"], cwd=tmp,
                              capture_output=True, text=True, env={**env, "GIT_DIR": tmp, "GIT_CONFIG_NOSYSTEM": "1"})
    if proc.returncode == 0 and proc.stdout.strip():
        return proc.stdout.strip()
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    default = os.path.join(xdg, "git", "ignore")
    return default if os.path.isfile(default) else None


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _bool(value: str | None) -> bool | None:
    """A git boolean as git reads it (a key with no `=` is true); None when absent or not a boolean."""
    if value is None:
        return None
    low = value.lower()
    return True if low in _TRUE else False if low in _FALSE else None


def _carried(repo_config: dict[str, str]) -> list[tuple[str, str]]:
    """The repository's boolean and enum keys that shape file content, after validation."""
    out = []
    for key in _CARRIED_BOOL:
        value = repo_config.get(key)
        flag = _bool(value)
        if flag is not None:
            out.append((key, "true" if flag else "false"))
    for key, allowed in _CARRIED_ENUM.items():
        value = repo_config.get(key)
        if value is not None and value.lower() in allowed:
            out.append((key, value.lower()))
    return out


def _config_text(fmt: dict[str, str], carried: list[tuple[str, str]], bare: bool) -> str:
    sections: dict[str, list[tuple[str, str]]] = {"core": [], "extensions": []}
    version = "1" if fmt else "0"
    core = [("repositoryformatversion", version), ("bare", "true" if bare else "false"), ("fsmonitor", "false"),
            ("hooksPath", "/dev/null"), ("attributesFile", "/dev/null"), ("untrackedCache", "false"),
            ("logAllRefUpdates", "false")]
    excludes = _operator_excludes()
    if excludes:
        core.append(("excludesFile", _quote(excludes)))
    sections["core"] = core + [(k.split(".", 1)[1], v) for k, v in carried]
    sections["extensions"] = list(fmt.items())
    sections.update({"protocol": [("allow", "never")], "gc": [("auto", "0")], "maintenance": [("auto", "false")],
                     "commit": [("gpgSign", "false")], "tag": [("gpgSign", "false")],
                     "submodule": [("recurse", "false")], "index": [("skipHash", "false")]})
    lines = []
    for name, items in sections.items():
        if items:
            lines.append(f"[{name}]")
            lines += [f"\t{k} = {v}" for k, v in items]
    return "\n".join(lines) + "\n"


def _read_repo_config(common: Path, scratch_env: Mapping[str, str], cwd: Path) -> dict[str, str]:
    """Every key of the repository's own config file as text (includes are not followed), read by
    `git config --file`, which only parses it."""
    path = common / "config"
    if not path.is_file():
        return {}
    proc = subprocess.run(["git", "config", "--file", str(path), "--no-includes", "--list", "-z"], cwd=cwd,
                          capture_output=True, env=dict(scratch_env))
    if proc.returncode != 0:
        raise TaskError(f"git cannot read {path}: {proc.stderr.decode('utf-8', 'replace').strip()[:300]}; "
                        "expected a git config file (check it with `git config --file PATH --list`)")
    found: dict[str, str] = {}
    for item in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        key, _, value = item.partition("\n")
        if key:
            found[key.lower()] = value
    return found


def _format(config: dict[str, str], where: Path, linked: bool) -> dict[str, str]:
    """The repository format extensions the view needs (object format, ref storage), validated."""
    version = config.get("core.repositoryformatversion", "0")
    if version not in ("0", "1"):
        raise TaskError(f"{where} has core.repositoryformatversion {version!r}; the harness reads versions 0 "
                        "and 1 (what git writes), e.g. `repositoryformatversion = 0`")
    fmt = {}
    objects = config.get("extensions.objectformat", "sha1").lower() if version == "1" else "sha1"
    refs = config.get("extensions.refstorage", "files").lower() if version == "1" else "files"
    if objects not in ("sha1", "sha256") or refs not in ("files", "reftable"):
        raise TaskError(f"{where} has extensions.objectFormat {objects!r} / refStorage {refs!r}; expected sha1 or "
                        "sha256 and files or reftable")
    if refs == "reftable" and linked:
        raise TaskError(f"{where} is a linked worktree of a reftable repository, which the harness does not read; "
                        "run it from the main worktree")
    if objects != "sha1":
        fmt["objectFormat"] = objects
    if refs != "files":
        fmt["refStorage"] = refs
    if config.get("core.worktree"):
        raise TaskError(f"{where} sets core.worktree ({config['core.worktree']!r}); the harness reads checkouts "
                        "whose .git sits in the work tree's top folder (or is a `gitdir:` file there)")
    return fmt


def _link_state(checkout: Checkout, view_dir: Path) -> None:
    """Copy HEAD and info/exclude into the view; link refs, packed-refs, reftable, shallow and the index."""
    head = _read_small(checkout.git_dir / "HEAD")
    if not _HEAD.fullmatch(head):
        raise TaskError(f"{checkout.git_dir / 'HEAD'} holds {head[:80]!r}; expected `ref: refs/heads/<name>` or "
                        "a commit id")
    (view_dir / "HEAD").write_text(head if head.endswith("\n") else head + "\n")
    for name in ("refs", "packed-refs", "reftable", "shallow"):
        if os.path.lexists(checkout.common_dir / name):
            os.symlink(os.path.realpath(checkout.common_dir / name), view_dir / name)
    if checkout.top is not None:
        for entry in checkout.git_dir.iterdir():
            if entry.name == "index" or entry.name.startswith("sharedindex."):
                os.symlink(os.path.realpath(entry), view_dir / entry.name)
    exclude = checkout.common_dir / "info" / "exclude"
    if exclude.is_file():
        with open(exclude, "rb") as f:
            (view_dir / "info" / "exclude").write_bytes(f.read(_MAX_SMALL))


def _make_dir(view_dir: Path, config: str, objects: bool) -> None:
    (view_dir / "info").mkdir()
    (view_dir / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES)
    (view_dir / "config").write_text(config)
    if objects:
        (view_dir / "objects").mkdir()
        (view_dir / "refs" / "heads").mkdir(parents=True)
        (view_dir / "refs" / "tags").mkdir()
        (view_dir / "HEAD").write_text("ref: refs/heads/main\n")


@contextmanager
def scratch() -> Iterator[GitView]:
    """A view of an empty repository the harness made (objects and refs its own, removed afterwards)."""
    tmp = Path(tempfile.mkdtemp(prefix="harness-git-"))
    try:
        _make_dir(tmp, _config_text({}, [], bare=False), objects=True)
        yield GitView(tmp, None, _base_env(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def view(path: Path, *, work_tree: bool = True) -> Iterator[GitView]:
    """The view of the repository holding `path` (a folder in a checkout, or a git directory), with its
    work tree unless `work_tree` is False.

    Raises:
        TaskError: `path` is in no repository, or in one the view cannot serve (its format, core.worktree).
    """
    found = find_checkout(Path(path))
    if found is None:
        raise TaskError(f"{path} is not in a git repository (no valid .git folder or file found above it); "
                        "pass a git checkout or a bare clone, e.g. one made with `git clone URL`")
    tmp = Path(tempfile.mkdtemp(prefix="harness-git-"))
    try:
        (tmp / "scratch").mkdir()
        scratch_env = _base_env(tmp / "scratch")
        config = _read_repo_config(found.common_dir, scratch_env, tmp)
        fmt = _format(config, found.common_dir, found.git_dir != found.common_dir)
        shared = found.top is not None and work_tree and not _bool(config.get("core.bare"))
        checkout = found if shared else Checkout(None, found.git_dir, found.common_dir, "")
        view_dir = tmp / "git"
        view_dir.mkdir()
        _make_dir(view_dir, _config_text(fmt, _carried(config), bare=checkout.top is None), objects=False)
        _link_state(checkout, view_dir)
        env = _base_env(view_dir)
        env["GIT_OBJECT_DIRECTORY"] = os.path.realpath(found.common_dir / "objects")
        if checkout.top is not None:
            env["GIT_WORK_TREE"] = str(checkout.top)
        promisor = "extensions.partialclone" in config or any(
            k.startswith("remote.") and k.endswith(".promisor") and _bool(v) for k, v in config.items())
        yield GitView(view_dir, checkout, env, promisor)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def remote_git(args: Sequence[str], *, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """`git ARGS` for a clone or fetch from an operator-given URL into a bare clone the harness made:
    the operator's config is read (credentials, proxies, insteadOf), the transports are REMOTE_PROTOCOLS,
    git never prompts, never fetches lazily and runs no hook (`core.hooksPath=/dev/null`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_ALLOW_PROTOCOL": REMOTE_PROTOCOLS, "GIT_TERMINAL_PROMPT": "0", "GIT_NO_LAZY_FETCH": "1",
                "GIT_PROTOCOL_FROM_USER": "0", "GIT_NO_REPLACE_OBJECTS": "1"})
    cmd = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never",
           *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def in_repository(path: Path, args: Sequence[str], *, stdin: bytes = b"", env: Mapping[str, str] | None = None,
                  timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    """`git ARGS` run in the folder `path` through the view of the repository holding it; when it is in
    none, in an empty scratch repository (so git finds nothing: `rev-parse` of anything fails)."""
    if find_checkout(Path(path)) is None:
        with scratch() as empty:
            return empty.run(args, cwd=empty.dir, stdin=stdin, env=env, timeout=timeout)
    with view(Path(path)) as repo:
        return repo.run(args, cwd=Path(path), stdin=stdin, env=env, timeout=timeout)


def in_folder(path: Path, args: Sequence[str], *, stdin: bytes = b"", env: Mapping[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    """`git ARGS` on the files of the folder `path` as a work tree of an empty scratch repository,
    whatever `.git` is in or above it (`git apply --check`, `git apply` on a private copy)."""
    with scratch() as empty:
        return empty.run(args, cwd=Path(path), stdin=stdin, env={"GIT_WORK_TREE": str(Path(path).resolve()),
                                                                 **(env or {})}, timeout=timeout)
