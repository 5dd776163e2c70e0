"""Which offline interpreter stands in for the one a SWE-bench spec asks for.

Only Python 3.9, 3.11 and 3.13 are available offline; the official specs ask for 3.5 to 3.11. The
rule, in order:

1. Never below the project's own minimum (`minimum`, from `Spec.python_min`): Sphinx 8.0 and 8.1
   dropped Python 3.9, so their request for 3.10 becomes 3.11.
2. Otherwise the nearest available minor version; a request older than 3.9 becomes 3.9 and one
   newer than 3.13 becomes 3.13.
3. A tie (3.10 between 3.9 and 3.11, 3.12 between 3.11 and 3.13) goes to the older one.

Why older on a tie: a spec pins exact releases of compiled dependencies from the time of the
requested version, and a release publishes wheels for the Pythons that existed before it, never for
later ones. Every xarray spec asks for 3.10 and pins numpy 1.23.0, whose wheels stop at 3.10 (the
first numpy with 3.11 wheels is 1.23.2): on 3.11 it would have to be compiled from source, on 3.9 it
installs as a wheel. Going one version down costs only what is new in the requested version, which a
project rarely requires at the version that introduced it (rule 1 covers the ones that do); going up
costs what the newer version removed (3.11 removed `asyncio.coroutine` and `binhex`, 3.12 removed
`distutils` and `imp`), which old projects and their pinned dependencies still use. The requests
below 3.9 (django 1.x to 3.2, scikit-learn 0.2x, old astropy and matplotlib) have no older choice.
"""

from __future__ import annotations

import re

from harness.errors import TaskError

AVAILABLE: tuple[str, ...] = ("3.9", "3.11", "3.13")
"""The interpreters available offline, oldest first."""

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?$")


def interpreter_for(requested: str, *, minimum: str | None = None) -> str:
    """The offline interpreter ("3.9", "3.11" or "3.13") to use for a request such as "3.10".

    Raises:
        TaskError: `requested` or `minimum` is not a Python 3 version ("3.10", "3.6.15"), or no
            available interpreter is as new as `minimum`.
    """
    wanted = _minor(requested, "requested")
    floor = _minor(minimum, "minimum") if minimum is not None else 0
    candidates = [_minor(a, "available") for a in AVAILABLE if _minor(a, "available") >= floor]
    if not candidates:
        raise TaskError(f"the project needs Python {minimum} or newer, and the newest interpreter available "
                        f"offline is {AVAILABLE[-1]} (available: {', '.join(AVAILABLE)})")
    best = min(candidates, key=lambda minor: (abs(minor - wanted), minor))
    return f"3.{best}"


def _minor(version: str, what: str) -> int:
    match = _VERSION.match(version.strip())
    if match is None or match.group(1) != "3":
        raise TaskError(f"{what} Python version {version!r} is not a Python 3 version: expected "
                        f"major.minor such as '3.10' (only {', '.join(AVAILABLE)} are available offline)")
    return int(match.group(2))
