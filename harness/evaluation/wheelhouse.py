"""A wheelhouse for a task's environment, downloaded on the host with pip for the image's Python.

The sandbox never gets network: every dependency is fetched here and installed offline in the image.
`pip download --python-version` evaluates environment markers against the interpreter running pip,
not the target (pypa/pip#11010), so a dependency such as ``tomli; python_version < "3.11"`` would be
missed for a 3.9 image. After each download the wheels' own requirements are evaluated against the
target's markers and anything missing is downloaded too, until nothing is missing.
"""

from __future__ import annotations

import hashlib
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.evaluation.sources import cache_dir

GLIBC_MINOR = {"3.9": 31, "3.11": 36, "3.13": 41}   # Debian bullseye, bookworm, trixie
MAX_ROUNDS = 6


class WheelhouseError(Exception):
    """pip could not download the wheels (the message holds pip's own words)."""


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


def pip_flags(python: str) -> list[str]:
    machine = platform.machine()
    nodot = python.replace(".", "")
    flags = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp",
             "--abi", f"cp{nodot}", "--abi", "abi3", "--abi", "none", "--platform", "any",
             "--platform", f"manylinux2014_{machine}", "--platform", f"manylinux1_{machine}"]
    for minor in range(GLIBC_MINOR.get(python, 28), 4, -1):
        flags += ["--platform", f"manylinux_2_{minor}_{machine}"]
    return flags


def build_wheelhouse(requirements: list[str], python: str, progress: Callable[[str], None]) -> Path:
    """A folder of wheels that satisfies `requirements` on `python`, cached by their hash."""
    wanted = applicable(requirements, python)
    key = hashlib.sha256(f"{python}\n{platform.machine()}\n".encode() + "\n".join(sorted(wanted)).encode())
    dest = cache_dir() / "wheels" / key.hexdigest()[:16]
    if (dest / ".complete").is_file():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    extra: list[str] = []
    for _ in range(MAX_ROUNDS):
        _download(wanted + extra, python, dest, progress)
        missing = missing_dependencies(dest, python)
        if not missing:
            (dest / ".complete").write_text("\n".join(wanted) + "\n")
            return dest
        progress(f"wheelhouse: adding {', '.join(missing)} (needed on Python {python})")
        extra += missing
    raise WheelhouseError(f"the dependencies of {wanted} did not settle after {MAX_ROUNDS} rounds; "
                          f"still missing {missing}")


def _download(reqs: list[str], python: str, dest: Path, progress: Callable[[str], None]) -> None:
    if not reqs:
        return
    progress(f"pip download for Python {python}: {' '.join(reqs)}")
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
           "--dest", str(dest), *pip_flags(python), *reqs]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise WheelhouseError(f"pip download for Python {python} failed for {reqs}: "
                              + "\n".join(said[-12:]) + "\nEvery requirement needs a wheel for this "
                              "Python and Linux (sdists are not built); pin a version that has one.")


def missing_dependencies(wheels: Path, python: str) -> list[str]:
    """Requirements of the wheels in `wheels` that hold on `python` and that no wheel there provides."""
    env = target_environment(python)
    have = {canonicalize_name(w.name.split("-")[0]) for w in wheels.glob("*.whl")}
    missing: dict[str, str] = {}
    for wheel in wheels.glob("*.whl"):
        for text in _requires(wheel):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            name = canonicalize_name(req.name)
            if name not in have:
                req.marker = None
                missing.setdefault(name, str(req))
    return sorted(missing.values())


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next((n for n in zf.namelist() if re.match(r"[^/]+\.dist-info/METADATA$", n)), None)
        if meta is None:
            return []
        text = zf.read(meta).decode("utf-8", errors="replace")
    head = text.split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in head.splitlines() if line.startswith("Requires-Dist:")]
