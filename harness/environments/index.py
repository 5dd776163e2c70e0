"""What the package index says of a project (PEP 691 JSON), and which wheels a target accepts.

Read by the resolver (`resolver.py`) when uv names a package without a wheel: the files of a project,
their versions, and whether a wheel's tags fit a Linux CPython of the sandbox's Debian release; and by
the lock (`lock_files.py`): which file of a pinned release pip would install on the target.
"""

from __future__ import annotations

import http.client
import json
import platform
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from harness.environments.network import transient, with_retries
from harness.environments.resolution import IndexUnreachable, ResolveError, exclude_newer, is_exact_pin, split_pin
from harness.environments.wheelhouse import GLIBC_MINOR

INDEX_URL = "https://pypi.org/simple"


def ordered_tags(python: str) -> list[Tag]:
    """The wheel tags a Linux CPython `python` with the glibc of its Debian release accepts, most
    preferred first (the order in which pip prefers them)."""
    version = (int(python.split(".")[0]), int(python.split(".")[1]))
    machine = platform.machine()
    plats = [f"manylinux_2_{m}_{machine}" for m in range(GLIBC_MINOR[python], 4, -1)]
    plats += [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]
    return [*cpython_tags(version, platforms=plats), *compatible_tags(version, f"cp{version[0]}{version[1]}", plats)]


def target_tags(python: str) -> frozenset[Tag]:
    """The wheel tags a Linux CPython `python` with the glibc of its Debian release accepts."""
    return frozenset(ordered_tags(python))


def wheel_for(pin: str, python: str, files: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The index entry of the wheel of `pin` (name==version) that pip would install on `python`: the one
    whose best tag comes first in `ordered_tags`, a higher build number first, a yanked file only when
    nothing else fits (pip takes a yanked file only for an exact pin). None when no wheel fits."""
    wanted = _version(split_pin(pin)[1])
    rank = {tag: i for i, tag in enumerate(ordered_tags(python))}
    best: tuple[tuple[int, int, int], dict[str, Any]] | None = None
    for f in files:
        try:
            _, version, build, tags = parse_wheel_filename(str(f.get("filename", "")))
        except (InvalidWheelFilename, InvalidVersion):
            continue
        fits = [rank[t] for t in tags if t in rank]
        if version != wanted or not fits or not str(f.get("hashes", {}).get("sha256", "")):
            continue
        order = (1 if f.get("yanked") else 0, min(fits), -(build[0] if build else 0))
        if best is None or order < best[0]:
            best = (order, f)
    return best[1] if best else None


def sdist_for(pin: str, files: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The index entry of the source distribution of `pin` (name==version), or None."""
    wanted = _version(split_pin(pin)[1])
    found = [f for f in files if file_version(str(f.get("filename", "")), sdist=True) == wanted
             and str(f.get("hashes", {}).get("sha256", ""))]
    return sorted(found, key=lambda f: (bool(f.get("yanked")), not str(f["filename"]).endswith(".tar.gz")))[0] \
        if found else None


def file_version(filename: str, *, sdist: bool = False) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return None if sdist else parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion):
        return None


def index_files(index_url: str, name: str) -> list[dict[str, Any]]:
    """The files of project `name` on the index (PEP 691 JSON: filename, url, hashes, upload-time...).

    Raises:
        IndexUnreachable: the network failed, again after `network.RETRY_PAUSES`.
        ResolveError: the index answered otherwise than with the page (404...), or not with JSON.
    """
    url = f"{index_url.rstrip('/')}/{canonicalize_name(name)}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})

    def read() -> Any:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read(64 << 20))

    try:
        data = with_retries(read, f"reading the index page {url}")
    except (OSError, ValueError, http.client.HTTPException) as exc:
        failure = IndexUnreachable if transient(exc) else ResolveError
        raise failure(f"the index page {url} of {name!r} could not be read ({exc}); expected the PEP 691 "
                      "JSON of a simple index such as https://pypi.org/simple") from exc
    files = data.get("files", []) if isinstance(data, dict) else []
    usable = []
    for f in files:
        if isinstance(f, dict) and isinstance(f.get("url"), str):
            f["url"] = urllib.parse.urljoin(url, f["url"])
            if urllib.parse.urlsplit(f["url"]).scheme in ("https", "http"):
                usable.append(f)
    return usable


def newest_exact_pin(requirements: Sequence[str], index_url: str) -> str | None:
    """The upload instant (as `exclude_newer` gives it, a day later) of the newest release among the exact
    pins (``name==1.2``) of `requirements`, or None when there is none."""
    newest: str | None = None
    for text in requirements:
        if not is_exact_pin(text):
            continue
        name, version = split_pin(text)
        for f in index_files(index_url, name):
            uploaded = f.get("upload-time")
            if isinstance(uploaded, str) and file_version(str(f.get("filename", ""))) == _version(version):
                when = exclude_newer(uploaded[:10])
                newest = when if newest is None or when > newest else newest
    return newest


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None
