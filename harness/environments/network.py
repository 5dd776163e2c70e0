"""Reads from the package index, tried again after a momentary network failure.

The index pages (`index.py`), the lock's files (`lock_files.py`) and the sdists of a wheelhouse
(`wheelhouse.py`) are fetched through `with_retries`, and downloaded through `download`:
a failed name resolution, a refused or dropped connection, a timeout, or an answer of 429 or 5xx is
tried again after each of `RETRY_PAUSES`; any other answer (404 included) and anything after the last
pause is raised as it came. Without it a DNS blip of a few seconds while a lock was made recorded the
task as unsupported offline, and one during a download failed the environment's build.
"""

from __future__ import annotations

import hashlib
import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

from sandbox.api import Progress, quiet

T = TypeVar("T")

RETRY_PAUSES: tuple[float, ...] = (2.0, 5.0, 10.0)
"""Seconds waited before each new attempt (so 1 + len attempts in all)."""


def transient(exc: BaseException) -> bool:
    """Whether `exc` is a network failure that may not happen again: anything but an HTTP answer, or
    an answer of 429 (too many requests) or 5xx."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code == 429 or exc.code >= 500
    return isinstance(exc, (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException))


def with_retries(call: Callable[[], T], what: str, progress: Progress = quiet) -> T:
    """`call()`, called again after each of `RETRY_PAUSES` while it fails with a `transient` error.

    Raises:
        whatever `call` raised the last time, or at once when the error is not transient.
    """
    for pause in (*RETRY_PAUSES, None):
        try:
            return call()
        except (OSError, http.client.HTTPException) as exc:
            if pause is None or not transient(exc):
                raise
            progress(f"{what} failed ({exc}); trying again in {pause:g} s")
            time.sleep(pause)
    raise AssertionError("unreachable: the last attempt returns or raises")


def download(url: str, part: Path) -> str:
    """`url` written into `part` (from its start: an attempt after a failure rewrites it); its sha256.

    Raises:
        http.client.IncompleteRead: the connection closed before the announced length came (`read(n)`
            returns what there was and raises nothing: the short file would be taken for a changed one).
        OSError: the network or the file failed.
    """
    with open(part, "wb") as out:
        return fetch_into(url, out)


def fetch_into(url: str, out: IO[bytes], check: Callable[[int], None] | None = None) -> str:
    """`url` written into `out` from its start (an earlier attempt's bytes are dropped); its sha256.
    `check(size)` is called after each chunk with the bytes written so far (it may raise to stop).

    Raises:
        http.client.IncompleteRead: the connection closed before the announced length came.
        OSError: the network or the file failed.
    """
    out.seek(0)
    out.truncate()
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=300) as answer:
        while chunk := answer.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
            if check is not None:
                check(out.tell())
        if answer.length:
            raise http.client.IncompleteRead(b"", answer.length)
    return digest.hexdigest()
