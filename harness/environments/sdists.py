"""Source-only releases read without being built: their declared dependencies from the archive's
PKG-INFO or egg-info/requires.txt (never unpacked, never run), and a stand-in wheel holding only that
metadata, with which uv resolves as if the release had a wheel (`resolver.py`).
"""

from __future__ import annotations

import http.client
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.environments.network import fetch_into, transient, with_retries
from harness.environments.resolution import IndexUnreachable, ResolveError, SdistOnly

MAX_MEMBER = 1 << 20        # a metadata member read, at most
MAX_SDIST = 200 << 20      # an sdist downloaded to read its metadata, at most


def read_sdist(name: str, version: str, f: dict[str, Any]) -> tuple[SdistOnly, list[str], str]:
    """The sdist of `f` downloaded into a temporary file (checked against its sha256) and its declared
    dependencies read from the archive's members as text: nothing is unpacked, built or run."""
    sha256 = str(f.get("hashes", {}).get("sha256", ""))
    with tempfile.TemporaryFile() as tmp:
        try:
            got = with_retries(lambda: fetch_into(str(f["url"]), tmp, check=_under_cap(str(f["filename"]))),
                               f"downloading {f['filename']}")
        except (OSError, http.client.HTTPException) as exc:
            failure = IndexUnreachable if transient(exc) else ResolveError
            raise failure(f"the sdist {f['filename']} of {name} {version} could not be downloaded from {f['url']} "
                          f"({exc!r})") from exc
        if sha256 and got != sha256:
            raise ResolveError(f"the sdist {f['filename']} has sha256 {got}, the index says {sha256}")
        tmp.seek(0)
        members = _metadata_members(tmp, str(f["filename"]))
    requires, known = _declared_requires(members)
    for text in requires:
        if Requirement(text).url is not None:
            raise ResolveError(f"the sdist {f['filename']} of {name} {version} requires {text!r}, a direct "
                               "reference (a URL, not a version from the index): refused, and nothing was fetched "
                               f"from it; pin another version of {name}")
    sdist = SdistOnly(name, version, str(f["filename"]), str(f["url"]), sha256, known)
    return sdist, requires, str(f.get("requires-python") or "")


def _under_cap(filename: str) -> Callable[[int], None]:
    def check(size: int) -> None:
        if size > MAX_SDIST:
            raise ResolveError(f"the sdist {filename} is over {MAX_SDIST >> 20} MB; not read")
    return check


def _metadata_members(archive: IO[bytes], filename: str) -> dict[str, str]:
    """PKG-INFO and egg-info members of an sdist (top folder removed from their names), as text."""
    wanted = re.compile(r"[^/]+/((?:src/)?[^/]+\.egg-info/(?:PKG-INFO|requires\.txt)|PKG-INFO)")
    out: dict[str, str] = {}
    try:
        if filename.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    if wanted.fullmatch(info.filename) and not info.is_dir() and info.file_size <= MAX_MEMBER:
                        out[info.filename.split("/", 1)[1]] = zf.read(info).decode("utf-8", "replace")
            return out
        with tarfile.open(fileobj=archive, mode="r:*") as tf:
            for member in tf:
                handle = tf.extractfile(member) if member.isreg() and wanted.fullmatch(member.name) else None
                if handle is not None and member.size <= MAX_MEMBER:
                    out[member.name.split("/", 1)[1]] = handle.read().decode("utf-8", "replace")
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise ResolveError(f"the sdist {filename} is not a readable archive ({exc})") from exc
    return out


def _declared_requires(members: dict[str, str]) -> tuple[list[str], bool]:
    """(Requires-Dist lines, whether they are known) from an sdist's PKG-INFO or egg-info/requires.txt."""
    head = members.get("PKG-INFO", "").split("\n\n", 1)[0]
    fields = [line.split(":", 1) for line in head.splitlines() if ":" in line]
    dist = [v.strip() for k, v in fields if k.strip().lower() == "requires-dist"]
    dynamic = {v.strip().lower() for k, v in fields if k.strip().lower() == "dynamic"}
    meta = next((v.strip() for k, v in fields if k.strip().lower() == "metadata-version"), "1.0")
    if dist or (_version_at_least(meta, "2.2") and "requires-dist" not in dynamic):
        return _valid_lines(dist), True
    egg = {k.rsplit("/", 1)[1]: v for k, v in members.items() if ".egg-info/" in k}
    if "requires.txt" in egg:
        return _valid_lines(_requires_txt(egg["requires.txt"])), True
    return [], "PKG-INFO" in egg


def _version_at_least(text: str, least: str) -> bool:
    try:
        return Version(text) >= Version(least)
    except InvalidVersion:
        return False


def _requires_txt(text: str) -> list[str]:
    """egg-info/requires.txt as Requires-Dist lines: `[extra]`, `[:marker]` and `[extra:marker]` sections."""
    out, markers = [], []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            extra, _, marker = line[1:-1].partition(":")
            markers = ([f'extra == "{canonicalize_name(extra)}"'] if extra else []) + ([marker] if marker else [])
        elif line and not line.startswith("#"):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            parts = [*markers, *([str(req.marker)] if req.marker else [])]
            req.marker = None
            out.append(f"{req}; " + " and ".join(f"({m})" for m in parts) if parts else str(req))
    return out


def _valid_lines(lines: list[str]) -> list[str]:
    valid = []
    for line in lines:
        try:
            valid.append(str(Requirement(line)))
        except InvalidRequirement:
            continue
    return valid


def write_standin(folder: Path, sdist: SdistOnly, requires: list[str], requires_python: str) -> None:
    """A wheel holding only the metadata of `sdist` (never installed: it lets uv resolve without building)."""
    write_metadata_wheel(folder, sdist.name, sdist.version, requires, requires_python)


def write_metadata_wheel(folder: Path, project: str, version: str, requires: Sequence[str] = (),
                         requires_python: str = "") -> None:
    """A wheel of `project` `version` in `folder` holding only its metadata: these `Requires-Dist` and
    `Requires-Python` (for uv's --find-links; never installed)."""
    name = canonicalize_name(project).replace("-", "_")
    extras = sorted(set(re.findall(r'extra == "([^"]+)"', "\n".join(requires))))
    lines = ["Metadata-Version: 2.1", f"Name: {project}", f"Version: {version}"]
    try:
        lines += [f"Requires-Python: {SpecifierSet(requires_python)}"] if requires_python else []
    except InvalidSpecifier:
        pass
    lines += [f"Provides-Extra: {e}" for e in extras] + [f"Requires-Dist: {r}" for r in requires]
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{info}/METADATA", "\n".join(lines) + "\n\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: harness-standin\nRoot-Is-Purelib: true\n"
                                     "Tag: py3-none-any\n\n")
        zf.writestr(f"{info}/RECORD", "")
