"""The files of a lock: which file of each pinned release it holds (read from the index once, when the lock
is made), and those files fetched again by their URL and checked against their sha256 when an
environment is built from it (cached by that hash under cache_dir()/files; nothing is resolved again).

    locked_files(pins, python)       LockedFile of the wheel pip would install for each pin
    locked_sdist(sdist)              a source-only pin's file (the resolver found it on the index)
    fetch_files(files, dest)         each file into `dest`, its digest checked; LockUnsatisfiable names
                                     the distribution that is no longer there or changed
"""

from __future__ import annotations

import http.client
import os
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.utils import canonicalize_name

from harness.core.sources import cache_dir
from harness.environments.errors import EnvironmentBuildError
from harness.environments.index import INDEX_URL, index_files, wheel_for
from harness.environments.lock import LockedFile
from harness.environments.network import download, with_retries
from harness.environments.resolution import ResolveError, SdistOnly, split_pin
from sandbox.api import Progress, quiet

THREADS = 6               # index pages and files fetched at once


class LockUnsatisfiable(EnvironmentBuildError):
    """A lock's file cannot be had as the lock says: no longer on the index, or another file under its
    name (`distribution` is its "name==version", `filename` the file)."""

    def __init__(self, distribution: str, filename: str, why: str) -> None:
        super().__init__(f"the lock cannot be satisfied: {distribution} ({filename}) {why}; the environment is "
                         "never made of other files than its lock's. Make the lock again (remove it from "
                         "~/.cache/harness/locks, or update the shipped one) if the index changed on purpose")
        self.distribution = distribution
        self.filename = filename


def locked_files(pins: Sequence[str], python: str, index_url: str = INDEX_URL) -> tuple[LockedFile, ...]:
    """The wheel of each exact pin that pip would install on `python`, as the index lists it.

    Raises:
        ResolveError: a pin has no wheel for the target (the resolver said it had one), or the index
            page could not be read.
    """
    def one(pin: str) -> LockedFile:
        name, version = split_pin(pin)
        entry = wheel_for(pin, python, index_files(index_url, name))
        if entry is None:
            raise ResolveError(f"{pin} has no wheel for Python {python} on {index_url} (the resolution took it as "
                               "having one); expected a release with a wheel for this interpreter and Linux")
        return LockedFile(name, version, str(entry["filename"]), str(entry["hashes"]["sha256"]), str(entry["url"]),
                          "wheel")

    with ThreadPoolExecutor(THREADS) as pool:
        return tuple(sorted(pool.map(one, sorted(set(pins))), key=lambda f: f.name))


def locked_sdist(sdist: SdistOnly) -> LockedFile:
    return LockedFile(canonicalize_name(sdist.name), sdist.version, sdist.filename, sdist.sha256, sdist.url, "sdist")


def fetch_files(files: Sequence[LockedFile], dest: Path, progress: Progress = quiet) -> None:
    """Each of `files` copied into `dest` under its file name, downloaded once into the cache by its URL.

    Raises:
        LockUnsatisfiable: a file is gone from the index (HTTP 404/410), or its digest is not the lock's.
        EnvironmentBuildError: a download failed otherwise (the network, again after
            `network.RETRY_PAUSES`), or a URL or name is refused.
    """
    dest.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(THREADS) as pool:
        for cached, locked in zip(pool.map(lambda f: _cached(f, progress), files), files, strict=True):
            shutil.copyfile(cached, dest / locked.filename)


def _cached(locked: LockedFile, progress: Progress) -> Path:
    if urllib.parse.urlsplit(locked.url).scheme not in ("https", "http") or "/" in locked.filename \
            or locked.filename.startswith(".") or len(locked.sha256) != 64:
        raise EnvironmentBuildError(f"the lock's entry for {locked.pin()} is refused: expected an http(s) URL, a "
                                    f"plain file name and a sha256, got {locked.url!r}, {locked.filename!r}, "
                                    f"{locked.sha256!r}")
    cached = cache_dir() / "files" / locked.sha256 / locked.filename
    if cached.is_file():
        return cached
    progress(f"downloading {locked.filename}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    # a part of its own: another build may be downloading the same file into the cache at this moment
    fd, name = tempfile.mkstemp(dir=cached.parent, prefix=f"{cached.name}.", suffix=".part")
    os.close(fd)
    part = Path(name)
    try:
        sha256 = with_retries(lambda: download(locked.url, part), f"downloading {locked.filename}", progress)
    except urllib.error.HTTPError as exc:
        part.unlink(missing_ok=True)
        if exc.code in (404, 410):
            raise LockUnsatisfiable(locked.pin(), locked.filename, f"is no longer on the index ({exc.code} from "
                                                                   f"{locked.url})") from exc
        raise EnvironmentBuildError(f"downloading {locked.filename} of {locked.pin()} from {locked.url} failed: "
                                    f"{exc}") from exc
    except (OSError, http.client.HTTPException) as exc:
        part.unlink(missing_ok=True)
        raise EnvironmentBuildError(f"downloading {locked.filename} of {locked.pin()} from {locked.url} failed: "
                                    f"{exc}") from exc
    if sha256 != locked.sha256:
        part.unlink()
        raise LockUnsatisfiable(locked.pin(), locked.filename, f"has sha256 {sha256} at {locked.url}, "
                                                               f"the lock says {locked.sha256}")
    part.replace(cached)        # atomic: the same bytes whichever download lands last
    return cached

