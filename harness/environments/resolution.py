"""What a resolution is: its result and error types, and the small rules about pins and dates that
every step of it shares (`declarations.py` reads, `resolver.py` resolves, `index.py` and `sdists.py`
answer its questions about the index).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from packaging.utils import canonicalize_name

from harness.environments.wheelhouse import WheelhouseError


class ResolveError(WheelhouseError):
    """The resolver found no set of pins (`said` holds uv's own words), or an input was refused."""

    def __init__(self, message: str, said: str = "") -> None:
        super().__init__(message)
        self.said = said


class IndexUnreachable(ResolveError):
    """The package index could not be read (the network failed again after `network.RETRY_PAUSES`): a
    failure of this machine's network, which says nothing of whether the task's environment resolves."""


@dataclass(frozen=True)
class SdistOnly:
    """A pinned release with no wheel for the target: its sdist must be built in a network-less container."""
    name: str
    version: str
    filename: str
    url: str
    sha256: str
    dependencies_known: bool   # False: the archive declared none readably, so none were assumed


@dataclass(frozen=True)
class Resolution:
    pins: tuple[str, ...]                 # every "name==version", sorted, the sdist-only ones included
    sdist_only: tuple[SdistOnly, ...]     # the pins that have no wheel for the target
    requirements: tuple[str, ...]
    given_pins: tuple[str, ...]
    python: str
    platform: str                         # uv's --python-platform, e.g. "x86_64-manylinux_2_31"
    exclude_newer: str                    # releases uploaded at or after this instant were excluded
    command: tuple[str, ...]              # the uv command line; $WORK: its folder of stand-ins and overrides
    project: str = ""                     # the project itself as resolved (name==release), never among the pins
    from_cache: bool = field(default=False, compare=False)

    def wheel_pins(self) -> list[str]:
        """The pins that have a wheel on the index for the target."""
        built = {(canonicalize_name(s.name), s.version) for s in self.sdist_only}
        return [p for p in self.pins if tuple(split_pin(p)) not in built]


def is_exact_pin(requirement: str) -> bool:
    """``name==version`` with nothing else (no marker, no wildcard, no other specifier)."""
    return re.fullmatch(r"[A-Za-z0-9._-]+==[^,;\s*]+", requirement.strip()) is not None


def split_pin(pin: str) -> list[str]:
    name, _, version = pin.partition("==")
    return [canonicalize_name(name), version.strip()]


def exclude_newer(as_of: datetime | date | str) -> str:
    """The instant (RFC 3339, UTC) before which releases count: a date means the end of that UTC day,
    a datetime without a zone is taken as UTC. E.g. "2019-06-01" -> "2019-06-02T00:00:00Z"."""
    if isinstance(as_of, str):
        try:
            as_of = datetime.fromisoformat(as_of) if "T" in as_of or " " in as_of else date.fromisoformat(as_of)
        except ValueError as exc:
            raise ResolveError(f"date {as_of!r} is not ISO 8601; expected e.g. \"2019-03-20T03:46:18Z\" "
                               "or \"2019-06-01\"") from exc
    if not isinstance(as_of, datetime):
        as_of = datetime(as_of.year, as_of.month, as_of.day, tzinfo=UTC) + timedelta(days=1)
    as_of = as_of.replace(tzinfo=UTC) if as_of.tzinfo is None else as_of.astimezone(UTC)
    return as_of.strftime("%Y-%m-%dT%H:%M:%SZ")


def requirement_name(requirement: str) -> str:
    """The project name a requirement text starts with, normalised (PEP 503): "Jinja2>=2.3" -> "jinja2"."""
    match = re.match(r"\s*([A-Za-z0-9._-]+)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else requirement
