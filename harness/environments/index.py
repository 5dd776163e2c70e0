"""What the package index says of a project (PEP 691 JSON), and which wheels a target accepts.

Read by the resolver (`resolver.py`) when uv names a package without a wheel: the files of a project,
their versions, and whether a wheel's tags fit a Linux CPython of the sandbox's Debian release.
"""

from __future__ import annotations

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

from harness.environments.resolution import ResolveError, exclude_newer, is_exact_pin, split_pin
from harness.environments.wheelhouse import GLIBC_MINOR

INDEX_URL = "https://pypi.org/simple"


def target_tags(python: str) -> frozenset[Tag]:
    """The wheel tags a Linux CPython `python` with the glibc of its Debian release accepts."""
    version = (int(python.split(".")[0]), int(python.split(".")[1]))
    machine = platform.machine()
    plats = [f"manylinux_2_{m}_{machine}" for m in range(GLIBC_MINOR[python], 4, -1)]
    plats += [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]
    return frozenset([*cpython_tags(version, platforms=plats),
                      *compatible_tags(version, f"cp{version[0]}{version[1]}", plats)])


def file_version(filename: str, *, sdist: bool = False) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return None if sdist else parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion):
        return None


def index_files(index_url: str, name: str) -> list[dict[str, Any]]:
    """The files of project `name` on the index (PEP 691 JSON: filename, url, hashes, upload-time...)."""
    url = f"{index_url.rstrip('/')}/{canonicalize_name(name)}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            data = json.loads(answer.read(64 << 20))
    except (OSError, ValueError) as exc:
        raise ResolveError(f"the index page {url} of {name!r} could not be read ({exc}); expected the PEP 691 "
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
