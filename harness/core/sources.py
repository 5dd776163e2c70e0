"""Project sources on the host: tarballs, git clones, and patch checks that write nothing.

Everything here works on the host, on copies: a task's own files are never modified. Sources are
extracted into the harness's cache folder only (every destination is checked to stay inside it, and
only folders inside it are ever removed), with `filter="data"` and caps on size and member count.
A hostile patch is never applied on the host: `check_patch` only asks `git apply --check` and
`patch --dry-run`; patches are applied for real inside a grading sandbox (harness.evaluation.grading),
so a half-applied tree only ever exists in a throwaway container.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from platformdirs import user_cache_dir
from unidiff.patch import PatchSet

from harness import checks
from harness.core import hostgit
from harness.errors import TaskError

MAX_SOURCE_BYTES = 512 * 1024 * 1024
"""Cap on a project's extracted size: the sandbox copies at most this much (`SandboxSpec.max_copy_bytes`)."""
MAX_SOURCE_FILES = 100_000
"""Cap on a project's member count: the sandbox's `SandboxSpec.max_copy_files`."""

GIT_APPLY = ("git", "apply", "--verbose", "--whitespace=nowarn", "-")
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "harness", "GIT_AUTHOR_EMAIL": "harness@localhost",
                "GIT_COMMITTER_NAME": "harness", "GIT_COMMITTER_EMAIL": "harness@localhost"}
"""Who the harness's own commits (baselines, exported task sources) are by, so git needs no user config."""
GNU_PATCH = ("patch", "--batch", "--fuzz=5", "-p1", "--forward", "--no-backup-if-mismatch", "--reject-file=-")


def cache_dir() -> Path:
    """Where wheelhouses and extracted sources are kept (the user's cache folder for harness)."""
    return Path(user_cache_dir("harness"))


def sources_root() -> Path:
    """The one folder extracted sources live in; nothing outside it is ever removed by this module."""
    root = cache_dir() / "sources"
    root.mkdir(parents=True, exist_ok=True)
    return root


def task_repo_dir(task_path: Path) -> Path:
    """The project folder of a task directory: repo/, or repo.tar.gz extracted once into the cache."""
    if (task_path / "repo").is_dir():
        return task_path / "repo"
    tarball = task_path / "repo.tar.gz"
    name = checks.identifier(Path(task_path).resolve().name, str(task_path), "task folder name")
    digest = _sha256(tarball)[:16]
    root = sources_root()
    dest = checks.child(root, f"{name}-{digest}")
    if not dest.is_dir():
        extract_tarball(tarball, dest, root)
    return dest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def extract_tarball(tarball: Path, dest: Path, root: Path) -> None:
    """Extract `tarball` into `dest` (a folder strictly inside `root`), dropping a single top folder.

    Refuses unsafe members (`filter="data"`) and more than MAX_SOURCE_FILES members or
    MAX_SOURCE_BYTES of content; a previous `dest` is replaced only after the extraction succeeded.

    Raises:
        TaskError: not a tarball, or over a cap (nothing is kept).
        UnsafePathError: `dest` is not inside `root`.
    """
    try:
        with tarfile.open(tarball) as tar:
            _install(tar, str(tarball), dest, root)
    except (tarfile.TarError, OSError) as exc:
        raise TaskError(f"cannot extract {tarball}: {exc}; expected a .tar.gz of the project's files "
                        "at the base commit, e.g. made with `git archive --format=tar.gz HEAD`") from exc


def checkout_commit(clone: Path, commit: str, dest: Path, root: Path) -> None:
    """Write the tree of `commit` in the git clone `clone` into `dest` (no .git folder), with the
    same checks and caps as `extract_tarball`. `commit` must be 7 to 40 hex digits."""
    commit = checks.commit(commit, f"git clone {clone}")
    cap = MAX_SOURCE_BYTES + 1024 * MAX_SOURCE_FILES + (1 << 20)   # content, headers and padding
    with tempfile.TemporaryFile(dir=root) as spool:
        with hostgit.view(clone, work_tree=False) as repo:
            proc = repo.popen(["archive", "--format=tar", "--end-of-options", commit])
            assert proc.stdout is not None and proc.stderr is not None
            over = _spool(proc.stdout, spool, cap)
            if over:
                proc.kill()
            _, err = proc.communicate(timeout=600)
        if over:
            raise TaskError(_cap_message(f"base_commit {commit} of {clone}", f"{cap} bytes of archive"))
        if proc.returncode != 0:
            raise TaskError(f"git clone {clone} does not contain base_commit {commit!r}: "
                            f"{err.decode(errors='replace').strip()}; fetch it first, e.g. "
                            f"`git -C {clone} fetch origin {commit}`")
        spool.seek(0)
        with tarfile.open(fileobj=spool) as tar:
            _install(tar, f"base_commit {commit} of {clone}", dest, root)


DEFAULT_URL_TEMPLATE = "https://github.com/{repo}.git"


def clone_url(template: str, repo: str) -> str:
    """The clone URL of `repo` (owner/name, already checked) from the operator's `template`.

    Raises:
        TaskError: the template has no {repo}, or the URL would read as an option.
    """
    if "{repo}" not in template:
        raise TaskError(f"--repo-url {template!r} has no {{repo}}; expected e.g. {DEFAULT_URL_TEMPLATE!r} "
                        "or 'file:///mirrors/{repo}.git'")
    url = template.replace("{repo}", repo)
    if url.startswith("-") or "::" in url.split("/")[0]:
        raise TaskError(f"--repo-url gives {url!r}, which git would read as an option or a command transport; "
                        f"expected a URL such as {DEFAULT_URL_TEMPLATE!r}")
    return url


def mirror_clone(repo: str, commit: str, template: str, progress: Callable[[str], None]) -> Path:
    """A bare clone of `repo` in the cache that holds `commit`: cloned from `clone_url(template, repo)`
    the first time (saying so through `progress`), fetched again when it lacks `commit`.

    Raises:
        TaskError: git could not clone or fetch; the message holds git's own words and what to try.
    """
    owner, name = repo.split("/")
    root = checks.private_dir(cache_dir() / "clones")
    clone = checks.child(root, f"{checks.identifier(owner, 'repo')}__{checks.identifier(name, 'repo')}.git")
    url = clone_url(template, repo)
    if not clone.is_dir():
        progress(f"cloning {url} into {clone} (once; later runs reuse it)")
        _git_source(["clone", "--bare", "--quiet", "--", url, str(clone)], repo, url)
    if hostgit.in_repository(clone, ["cat-file", "-e", f"{commit}^{{commit}}"]).returncode != 0:
        progress(f"fetching {commit[:12]} of {repo} from {url}")
        _git_source(["-C", str(clone), "fetch", "--quiet", "--", url, commit], repo, url)
    return clone


def _git_source(args: list[str], repo: str, url: str) -> None:
    """A clone or fetch from the operator's URL (`hostgit.remote_git`: no `ext::`, no prompt, no hook)."""
    proc = hostgit.remote_git(args)
    if proc.returncode != 0:
        raise TaskError(f"could not get the source of {repo} from {url}: {proc.stderr.strip()[-600:]}; give "
                        "the sources with --repos DIR (tarballs <instance_id>.tar.gz or clones <owner>__<name>) "
                        "or a reachable mirror with --repo-url, e.g. 'file:///mirrors/{repo}.git'")


def _spool(source: IO[bytes], sink: IO[bytes], cap: int) -> bool:
    """Copy `source` into `sink`; True (and stop) once more than `cap` bytes came."""
    total = 0
    for chunk in iter(lambda: source.read(1 << 20), b""):
        total += len(chunk)
        if total > cap:
            return True
        sink.write(chunk)
    return False


def _cap_message(what: str, amount: str) -> str:
    return (f"{what} holds more than {amount}: the caps on a project's sources are "
            f"{MAX_SOURCE_FILES} members and {MAX_SOURCE_BYTES} bytes once extracted "
            "(harness.core.sources.MAX_SOURCE_FILES / MAX_SOURCE_BYTES, the same as the sandbox's "
            "copy caps SandboxSpec.max_copy_files / max_copy_bytes, which a larger project could not pass "
            "either); nothing was extracted. For a project that big, raise both pairs of caps")


def _install(tar: tarfile.TarFile, what: str, dest: Path, root: Path) -> None:
    """Check every member of `tar` against the caps, extract it next to `dest`, then move it there."""
    dest = checks.child(root, os.path.relpath(dest, root))
    members, total = [], 0
    for member in tar:
        members.append(member)
        total += max(member.size, 0)
        if len(members) > MAX_SOURCE_FILES:
            raise TaskError(_cap_message(what, f"{MAX_SOURCE_FILES} members"))
        if total > MAX_SOURCE_BYTES:
            raise TaskError(_cap_message(what, f"{MAX_SOURCE_BYTES} bytes once extracted "
                                               f"(member {member.name!r} reaches {total})"))
    # a folder of this extraction's own (another run may be extracting the same source right now), then
    # swapped with the previous tree in one step: a run reading `dest` meanwhile never finds it missing
    # or half removed, and the previous tree is removed from the extraction's folder
    tmp = Path(tempfile.mkdtemp(prefix=f"{dest.name}.partial-", dir=root))
    try:
        tar.extractall(tmp, members=members, filter="data")
        entries = list(tmp.iterdir())
        top = entries[0] if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink() else tmp
        os.utime(top)      # the tree's time is its extraction's, not its commit's (the tarball check reads it)
        _swap_in(top, dest)
    finally:
        checks.remove_tree(tmp, root)


RENAME_EXCHANGE = 2      # renameat2(2)'s flag: the two names swap their files atomically (Linux 3.15)
AT_FDCWD = -100


def _swap_in(new: Path, dest: Path) -> None:
    """Put the tree `new` at `dest`; a tree already there ends up at `new`'s name. Atomic where the
    kernel can exchange two names (Linux's renameat2); elsewhere the old tree is moved aside first."""
    try:
        new.rename(dest)           # no tree there yet (an empty folder is replaced too)
        return
    except OSError:
        pass                       # a tree is there: exchange them
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.renameat2(AT_FDCWD, os.fsencode(new), AT_FDCWD, os.fsencode(dest), RENAME_EXCHANGE) == 0:
            return
    except (AttributeError, OSError):
        pass                       # no renameat2 here (not glibc, not Linux)
    aside = new.with_name(new.name + ".old")
    dest.rename(aside)
    new.rename(dest)
    aside.rename(new)


@dataclass(frozen=True)
class PatchOutcome:
    applied: bool
    output: str      # what git apply / patch said, each command after a `$ ` line


def check_patch(root: Path, patch: str) -> PatchOutcome:
    """Whether the unified diff `patch` applies to the files under `root`, asked as the grading sandbox
    applies it (`git apply`, then GNU patch) but with `git apply --check` and `patch --dry-run`: nothing
    under `root` is written, so a hostile patch (links, `..`) changes nothing on the host."""
    if not patch.strip():
        return PatchOutcome(True, "empty patch: nothing to apply")
    data = patch if patch.endswith("\n") else patch + "\n"
    said = []
    for cmd in ([*GIT_APPLY[:2], "--check", *GIT_APPLY[2:]], [*GNU_PATCH, "--dry-run"]):
        if shutil.which(cmd[0]) is None:
            continue
        if cmd[0] == "git":     # the files of `root` as the work tree of a scratch repository (core.hostgit)
            ran = hostgit.in_folder(root, cmd[1:], stdin=data.encode(), timeout=120)
            proc = subprocess.CompletedProcess(cmd, ran.returncode, ran.stdout.decode("utf-8", "replace"),
                                               ran.stderr.decode("utf-8", "replace"))
        else:
            proc = subprocess.run(cmd, input=data, text=True, cwd=root, capture_output=True, timeout=120,
                                  env={**os.environ, "GIT_CEILING_DIRECTORIES": str(Path(root).resolve().parent)})
        said.append(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}".rstrip())
        if proc.returncode == 0:
            return PatchOutcome(True, "\n".join(said))
    return PatchOutcome(False, "\n".join(said))


def patched_files(patch: str, existing_only: bool = False) -> list[str]:
    """The paths (relative to the project root) a unified diff touches, before and after; with
    `existing_only`, only the files it modifies or deletes (not those it creates)."""
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
