"""Wheels downloaded on the host with pip for a target Python; nothing is ever built on the host.

The sandbox never gets network: every dependency is fetched here and installed offline in the image
(or in the sandbox, for the `pip_download` tool). Two rules keep package code off the host:

- every `pip download` runs with `--only-binary=:all: --no-deps`, and the requirements it gets are
  validated first (`harness.checks.requirement`) and passed after `--`;
- pip never resolves dependencies itself (it would follow a dependency's direct URL and run an sdist's
  build backend, even with `--only-binary`). `download_wheels` resolves them level by level from the
  downloaded wheels' `Requires-Dist`, with the markers evaluated for the *target* Python (pip would
  evaluate them for its own interpreter, pypa/pip#11010, so ``tomli; python_version < "3.11"`` would be
  missed for a 3.9 image). A dependency given as a URL is refused before anything is fetched from it,
  unless the operator allows direct references (and then only a wheel file).

The first version found for a name is kept (no backtracking): conflicting ranges surface as an error
of the offline install, which names both.
"""

from __future__ import annotations

import hashlib
import http.client
import platform
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from harness import checks
from harness.core.interpreter import python_command
from harness.core.sources import cache_dir
from harness.environments.network import download, with_retries
from harness.errors import TaskError
from sandbox.api import Progress

GLIBC_MINOR = {"3.9": 31, "3.11": 36, "3.13": 41}   # Debian bullseye, bookworm, trixie
MAX_ROUNDS = 20                                     # levels of the dependency tree


class WheelhouseError(Exception):
    """pip could not download the wheels (the message holds pip's own words), or a requirement was refused."""


def target_environment(python: str) -> dict[str, str]:
    """PEP 508 marker values of a Linux CPython `python` on this machine's architecture."""
    return {"python_version": python, "python_full_version": f"{python}.0", "os_name": "posix",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": platform.machine(),
            "platform_python_implementation": "CPython", "implementation_name": "cpython",
            "implementation_version": f"{python}.0", "platform_release": "", "platform_version": "",
            "extra": ""}


def applicable(requirements: list[str], python: str) -> list[str]:
    """The requirements whose markers hold for `python`, with the markers removed."""
    env = target_environment(python)
    kept = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate(env):
            req.marker = None
            kept.append(str(req))
    return kept


def checked(requirements: list[str], python: str, *, direct_references: bool = False) -> list[str]:
    """`requirements` validated (exact pins; a wheel URL only with `direct_references`), then `applicable`.

    Raises:
        WheelhouseError: a requirement is refused; the message says which and why.
    """
    try:
        valid = [checks.requirement(r, "requirements", direct_references=direct_references) for r in requirements]
    except TaskError as exc:
        raise WheelhouseError(str(exc)) from exc
    return applicable(valid, python)


def pip_flags(python: str) -> list[str]:
    """pip's target flags for a Linux CPython `python` on this machine's architecture."""
    machine = platform.machine()
    nodot = python.replace(".", "")
    flags = ["--python-version", python, "--implementation", "cp",
             "--abi", f"cp{nodot}", "--abi", "abi3", "--abi", "none", "--platform", "any",
             "--platform", f"manylinux2014_{machine}", "--platform", f"manylinux1_{machine}"]
    for minor in range(GLIBC_MINOR.get(python, 28), 4, -1):
        flags += ["--platform", f"manylinux_2_{minor}_{machine}"]
    return flags


def build_wheelhouse(requirements: list[str], python: str, progress: Progress, *,
                     direct_references: bool = False) -> Path:
    """A folder of wheels that satisfies `requirements` on `python`, cached by their hash.

    Raises:
        WheelhouseError: a requirement or dependency was refused, or pip could not download a wheel.
    """
    wanted = checked(requirements, python, direct_references=direct_references)
    return _cached_folder(f"{python}\n{platform.machine()}\n", sorted(wanted), lambda dest: download_wheels(
        wanted, python, dest, pip_flags(python), progress, direct_references=direct_references))


def _cached_folder(prefix: str, wanted: list[str], fill: Callable[[Path], None]) -> Path:
    """The wheel folder for `wanted` under cache_dir()/wheels, named by a hash of `prefix` and `wanted`
    and filled by `fill` once (marked complete last; a failed fill leaves nothing behind)."""
    key = hashlib.sha256(prefix.encode() + "\n".join(wanted).encode())
    dest = cache_dir() / "wheels" / key.hexdigest()[:16]
    if (dest / ".complete").is_file():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    try:
        fill(dest)
    except WheelhouseError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    (dest / ".complete").write_text("\n".join(wanted) + "\n")
    return dest


def pinned_wheelhouse(pins: list[str], python: str, progress: Progress) -> Path:
    """A folder of the wheels of `pins` (exact "name==version", a complete resolution) for `python`,
    cached by their hash: one `pip download --only-binary=:all: --no-deps`, no dependency walk (the
    resolver already closed the set; some of its members are sdists that `download_sdist` fetches).

    Raises:
        WheelhouseError: a pin is refused, or pip could not download one of the wheels.
    """
    wanted = sorted(checked(pins, python))
    return _cached_folder(f"pinned\n{python}\n{platform.machine()}\n", wanted,
                          lambda dest: _download(wanted, python, dest, pip_flags(python), progress))


def download_sdist(url: str, filename: str, sha256: str, dest: Path, progress: Progress) -> Path:
    """The source archive at `url` saved as `dest/filename` after its sha256 matched (cached by it): never
    unpacked or built here; it is built into a wheel in a network-less container.

    Raises:
        WheelhouseError: the URL is not http(s), the name is not a plain file name, no sha256 was given,
            the download failed or its digest differs.
    """
    if urllib.parse.urlsplit(url).scheme not in ("https", "http") or not sha256:
        raise WheelhouseError(f"sdist {filename}: expected an http(s) URL with a sha256, got {url!r} / {sha256!r}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*\.(tar\.gz|zip|tar\.bz2|tgz)", filename):
        raise WheelhouseError(f"sdist file name {filename!r} is not a plain archive name like foo-1.0.tar.gz")
    cached = cache_dir() / "sdists" / sha256 / filename
    if not cached.is_file():
        progress(f"downloading the sdist {filename}")
        cached.parent.mkdir(parents=True, exist_ok=True)
        part = cached.with_suffix(".part")
        try:
            got = with_retries(lambda: download(url, part), f"downloading the sdist {filename}", progress)
        except (OSError, http.client.HTTPException) as exc:
            raise WheelhouseError(f"downloading the sdist {filename} from {url} failed: {exc}") from exc
        if got != sha256:
            part.unlink()
            raise WheelhouseError(f"the sdist {filename} has sha256 {got}, the index says {sha256}")
        part.rename(cached)
    shutil.copy2(cached, dest / filename)
    return dest / filename


def download_wheels(wanted: list[str], python: str, dest: Path, flags: list[str], progress: Progress, *,
                    direct_references: bool = False) -> None:
    """Wheels for `wanted` (validated requirements) and all their dependencies on `python` into `dest`:
    one `pip download --no-deps` per level of the dependency tree, with target `flags` (`pip_flags`).

    Raises:
        WheelhouseError: pip failed, a dependency is a refused direct reference, or the tree is too deep.
    """
    todo = wanted
    for _ in range(MAX_ROUNDS):
        _download(todo, python, dest, flags, progress)
        todo = missing_dependencies(dest, python, wanted, direct_references=direct_references)
        if not todo:
            return
        progress(f"wheelhouse: adding {', '.join(todo)} (needed on Python {python})")
    raise WheelhouseError(f"the dependencies of {wanted} did not settle after {MAX_ROUNDS} levels; "
                          f"still missing {todo}")


def _download(reqs: list[str], python: str, dest: Path, flags: list[str], progress: Progress) -> None:
    if not reqs:
        return
    progress(f"pip download for Python {python}: {' '.join(reqs)}")
    cmd = [*python_command("-m", "pip"), "download", "--disable-pip-version-check", "--no-input",
           "--only-binary=:all:", "--no-deps", "--dest", str(dest), *flags, "--", *reqs]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise WheelhouseError(f"pip download for Python {python} failed for {reqs}: "
                              + "\n".join(said[-12:]) + "\nEvery requirement needs a wheel for this "
                              "Python and Linux (sdists are not built); pin a version that has one.")


def missing_dependencies(wheels: Path, python: str, wanted: list[str] | tuple[str, ...] = (), *,
                         direct_references: bool = False) -> list[str]:
    """Requirements of `wanted` and of the wheels in `wheels` (with the extras asked of each) that hold
    on `python` and that no wheel there provides, one per name with the version ranges combined.

    Raises:
        WheelhouseError: a needed dependency is a direct reference (a URL) and `direct_references` is
            off, or it points to something other than a wheel file.
    """
    env = target_environment(python)
    requires = {canonicalize_name(w.name.split("-")[0]): w for w in sorted(wheels.glob("*.whl"))}
    todo = [Requirement(text) for text in wanted] + [Requirement(name) for name in requires]
    done: set[tuple[str, str]] = set()
    missing: dict[str, Requirement] = {}
    while todo:
        req = todo.pop(0)
        name = canonicalize_name(req.name)
        if name not in requires:
            _merge(missing, name, req)
            continue
        for extra in {""} | {canonicalize_name(e) for e in req.extras}:
            if (name, extra) not in done:
                done.add((name, extra))
                todo += _needed(requires[name], {**env, "extra": extra}, direct_references)
    return sorted(str(r) for r in missing.values())


def _needed(wheel: Path, env: dict[str, str], direct_references: bool) -> list[Requirement]:
    """The requirements of `wheel` whose markers hold in `env`, markers removed; URLs checked."""
    needed = []
    for text in _requires(wheel):
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if req.url is not None:
            _check_direct(wheel, text, req.url, direct_references)
        req.marker = None
        needed.append(req)
    return needed


def _check_direct(wheel: Path, text: str, url: str, allowed: bool) -> None:
    if not allowed:
        raise WheelhouseError(
            f"{wheel.name} requires {text!r}, a direct reference (a URL, not a version from the package "
            f"index): refused, and nothing was fetched from {url}. Dependencies come from the index only "
            "(a URL may hold a source distribution, whose build would run on this host); use a version of "
            f"{wheel.name.split('-')[0]} without it or, trusting that URL, let the operator run harness eval "
            "with --allow-direct-references (wheel files only)")
    try:
        checks.requirement(text, f"{wheel.name} (Requires-Dist)", pinned=False, direct_references=True)
    except TaskError as exc:
        raise WheelhouseError(str(exc)) from exc


def _merge(missing: dict[str, Requirement], name: str, req: Requirement) -> None:
    """Fold `req` into `missing[name]`: extras united, version ranges intersected, a URL kept."""
    have = missing.get(name)
    if have is None:
        missing[name] = Requirement(str(req))
        return
    have.extras |= req.extras
    if have.url or req.url:
        have.url, have.specifier = have.url or req.url, SpecifierSet()
    else:
        have.specifier &= req.specifier


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next((n for n in zf.namelist() if re.match(r"[^/]+\.dist-info/METADATA$", n)), None)
        if meta is None:
            return []
        text = zf.read(meta).decode("utf-8", errors="replace")
    head = text.split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in head.splitlines() if line.startswith("Requires-Dist:")]
