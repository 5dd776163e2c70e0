"""Operator credentials for `http_request`: headers the host adds when an approved request runs.

The model never sees them, the queue never stores them and previews hide them (saying where they come
from); the stored request names the credential instead, and its value is read again at execution.
They live in `credentials.toml` in the state folder, a file only its owner may read (0600):

    [[credentials]]
    name = "example-api"                          # what requests and previews name
    url = "https://api.example.com/v1/"           # requests to this scheme, host and port, under this path
    headers = { Authorization = "Bearer sk-..." }

A request gets the credential with the longest matching `url`; the match is on the parsed URL (same
scheme, host and port; the path at a `/` boundary), so `https://api.example.com.evil.org/` or
`https://api.example.com@evil.org/` never receives it. Redirects are not followed.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.errors import ConfigError

FILE_NAME = "credentials.toml"
KEYS = ("name", "url", "headers")
EXAMPLE = ('[[credentials]]\nname = "example-api"\nurl = "https://api.example.com/v1/"\n'
           'headers = { Authorization = "Bearer sk-..." }')
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme, 0), parts.path or "/"


@dataclass(frozen=True)
class Credential:
    name: str
    url: str
    headers: dict[str, str]
    source: Path

    def covers(self, url: str) -> bool:
        """True when `url` is on this credential's scheme, host and port, under its path."""
        try:
            scheme, host, port, path = _origin(url)
        except ValueError:            # a port that is not a number
            return False
        own_scheme, own_host, own_port, own_path = _origin(self.url)
        if (scheme, host, port) != (own_scheme, own_host, own_port):
            return False
        return path == own_path or path.startswith(own_path if own_path.endswith("/") else own_path + "/")

    @property
    def where(self) -> str:
        return f"operator credential {self.name!r} from {self.source}"


def credentials_file(state_dir: Path) -> Path:
    return Path(state_dir) / FILE_NAME


def _check_file(path: Path) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path} must be a regular file (it is a link or not a file); the operator's "
                          "credentials are never read through a link")
    if info.st_mode & 0o077 or info.st_uid != os.getuid():
        raise ConfigError(f"{path} has mode {stat.S_IMODE(info.st_mode):04o} and owner uid {info.st_uid}; "
                          f"credentials must be readable by their owner only (uid {os.getuid()}): "
                          f"`chmod 600 {path}`")


def _header_ok(name: object, value: object) -> bool:
    return (isinstance(name, str) and isinstance(value, str) and bool(name.strip()) and ":" not in name
            and not any(c in name + value for c in "\r\n\0"))


def _credential(raw: Any, where: str, source: Path) -> Credential:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table, got {type(raw).__name__}; example:\n{EXAMPLE}")
    problems = [f"unknown key {k!r} (expected some of {list(KEYS)})" for k in raw if k not in KEYS]
    name, url, headers = raw.get("name"), raw.get("url"), raw.get("headers")
    if not (isinstance(name, str) and _NAME.fullmatch(name)):
        problems.append(f"name {name!r} must be letters, digits, '_', '.', '-' (e.g. \"example-api\")")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
        problems.append(f"url {url!r} must be an absolute http(s) URL without user or password "
                        "(e.g. \"https://api.example.com/v1/\")")
    if not isinstance(headers, dict) or not headers or not all(_header_ok(k, v) for k, v in headers.items()):
        problems.append("headers must be a non-empty table of header name = value (no ':' in a name, no CR, "
                        "LF or NUL anywhere), e.g. { Authorization = \"Bearer sk-...\" }")
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems) + f". Example:\n{EXAMPLE}")
    return Credential(name=str(name), url=str(url), headers=dict(headers or {}), source=source)


def load_credentials(state_dir: Path) -> tuple[Credential, ...]:
    """The operator's credentials; none when the file does not exist."""
    path = credentials_file(state_dir)
    if not os.path.lexists(path):
        return ()
    _check_file(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; expected TOML such as:\n{EXAMPLE}") from exc
    extra = sorted(set(data) - {"credentials"})
    items = data.get("credentials", [])
    if extra or not isinstance(items, list):
        raise ConfigError(f"{path}: expected only [[credentials]] tables (found {extra or type(items).__name__}); "
                          f"example:\n{EXAMPLE}")
    found = tuple(_credential(item, f"{path} credentials[{i}]", path) for i, item in enumerate(items))
    names = [c.name for c in found]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ConfigError(f"{path}: credential names {doubled} appear more than once; each name must be unique")
    return found


def credential_for(credentials: tuple[Credential, ...], url: str) -> Credential | None:
    """The credential whose URL matches `url` most specifically, if any."""
    matching = [c for c in credentials if c.covers(url)]
    return max(matching, key=lambda c: len(_origin(c.url)[3]), default=None)


def credential_named(credentials: tuple[Credential, ...], name: str) -> Credential | None:
    return next((c for c in credentials if c.name == name), None)
