"""Secrets inside the files that go into the sandbox, whatever the files are called.

Each selected regular file is read (its folder through `checks.dir_beneath`, the file itself with
O_NOFOLLOW: no link followed) and scanned with the built-in rules of Kingfisher
(`kingfisher-secret-scanner`, MongoDB's scanner, Apache-2.0: about 490 rules, the Betterleaks/Gitleaks
catalogue plus its own, matched by Vectorscan and Rust's regex engine in linear time, each rule with its
own entropy and context filters). Rules of medium confidence and above are used (Kingfisher's default):
on a Django checkout (6,072 files) they flag one line, a test's `http://user:pass@testserver/` URL, and
a credential URL whose password is a placeholder is dropped (`PLACEHOLDER_RULES`), so none is left;
high-entropy-string and keyword detectors flag 169 ordinary lines in 75 files there
(detect-secrets 1.5.0's Base64/Hex entropy and Keyword plugins; its 24 other plugins flag 4 files, and
it takes minutes where this scan takes half a second). What a rule depends on is kept: an AWS access
key id alone is an identifier and is not reported; an id with its secret key is.

Bounds: a file whose first `BINARY_PROBE` bytes hold a NUL (and no UTF-16/32 byte-order mark) is
binary and not scanned (keystores and other binary secrets are left out by name,
`harness.core.secret_names`); a file is scanned `WINDOW` bytes at a time with an overlap, so memory
stays bounded whatever its size; each scan call has a timeout, and a file whose scan does not finish
or that cannot be read is reported as unscannable (the caller leaves it out: fail closed).

What is reported is the rule's id and the line of the first match, never the matched value: only
`rule_id` and `location` are read from a finding (and, for `PLACEHOLDER_RULES`, its value is compared
with the placeholders documentation writes, in memory, and dropped).

Cost: a verdict is kept per file by what `lstat` says of it (device, inode, size, modification and
change times, the key git's index uses to know a file is unchanged), in memory and in the harness's
cache folder (`secret-scan/verdicts.json`, rule ids and line numbers only), so a tree selected again
(the next `harness run --repo`, `harness mcp` before each session) reads and scans only the files that
changed (a file changed in the last 3 s keeps no verdict: file times have a coarse clock, and a second
change within the same tick would look unchanged; git's index has the same rule). The rules load
(about 0.5 s from their compiled cache, a few seconds the first time) in a background thread, started
at the first file that has no verdict, while the rest of the tree is listed.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import kingfisher_sdk
from kingfisher_sdk import Finding, Rules, Scanner

from harness import checks
from harness.core.sources import cache_dir
from harness.errors import TaskError, UnsafePathError

BINARY_PROBE = 8192
"""How many leading bytes are looked at for a NUL (the cheap binary check)."""
WINDOW = 8 * 1024 * 1024
"""A file is scanned this many bytes at a time."""
OVERLAP = 64 * 1024
"""Bytes of the previous window scanned again with the next, so a secret across the cut is found."""
SCAN_TIMEOUT = 30.0
"""Seconds one window's scan may take before the file is reported as unscannable."""
CONFIDENCE: Final = "medium"
"""The lowest rule confidence used (Kingfisher's default): "low" adds generic rules that flag code."""
RULES_VERSION = f"kingfisher {kingfisher_sdk.__version__} {CONFIDENCE} window {WINDOW} placeholders 1"
"""What a stored verdict was made with; verdicts made otherwise are not reused."""
RACY_NS = 3_000_000_000
"""A file changed less than this many nanoseconds before its scan keeps no verdict (see `_racy`)."""
PLACEHOLDER_RULES = frozenset({"betterleaks.generic-credential-uri"})
"""Rules whose match is dropped when it is a placeholder: a credential URL's password is as often the
documentation's `user:password@host` as a real one (every content hit on eight SWE-bench projects,
Django, Sphinx, pytest, pylint, sympy, xarray and seaborn, 21,000 files, was such a URL)."""
PLACEHOLDERS = frozenset({
    "password", "passwd", "pass", "pwd", "secret", "changeme", "change-me", "example", "test", "testing", "dummy",
    "fake", "placeholder", "1234", "12345", "123456", "admin", "root", "guest", "mypassword", "yourpassword",
})
"""Passwords that documentation and tests write (compared lowercased), besides templates (`<pw>`, `${PW}`,
`{{ pw }}`, `%(pw)s`) and masks (`***`, `xxx`)."""
_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")
_CACHE_LIMIT = 200_000

StatKey = str
"""A file's identity and version as `lstat` gives it: "device:inode:size:mtime_ns:ctime_ns"."""


@dataclass(frozen=True)
class Hit:
    """A secret found in a file: the id of the rule that matched and the 1-based line it starts on."""

    rule: str
    line: int


class _State:
    """The process's one scanner (built once, in a background thread) and the verdicts it has made."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.store_lock = threading.Lock()           # verdicts are added and written by concurrent selections
        self.thread: threading.Thread | None = None
        self.scanner: Scanner | None = None
        self.error: BaseException | None = None
        self.verdicts: dict[StatKey, list[object] | None] | None = None
        self.changed = False

    def warm_up(self) -> None:
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._build, name="secret-rules", daemon=True)
                self.thread.start()

    def _build(self) -> None:
        try:
            folder = checks.private_dir(cache_dir() / "secret-scan" / "rules")
            self.scanner = Scanner(Rules(confidence=CONFIDENCE, cache_dir=folder), redact=False)
        except Exception as exc:                     # re-raised where the scanner is needed, with context
            self.error = exc

    def scanner_now(self) -> Scanner:
        self.warm_up()
        assert self.thread is not None
        self.thread.join()
        if self.scanner is None:
            raise TaskError(f"the secret scanner could not load its rules ({self.error!r}); files cannot be "
                            "checked for secrets, so nothing is copied. Reinstall it: pip install "
                            "kingfisher-secret-scanner") from self.error
        return self.scanner

    def known(self) -> dict[StatKey, list[object] | None]:
        if self.verdicts is None:
            self.verdicts = _load_verdicts()
        return self.verdicts


_STATE = _State()


def stat_key(info: os.stat_result) -> StatKey:
    """The key a file's verdict is kept under (see the module's docstring)."""
    return f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


def prepare() -> None:
    """Load (and, the first time after an install, compile into the cache folder) the rules now, so the
    first `harness run --repo` does not wait for it (scripts/install calls this).

    Raises:
        TaskError: the scanner cannot load its rules.
    """
    _STATE.scanner_now()


def expect(key: StatKey) -> None:
    """Say that a file with this key will be scanned: the rules start loading if it has no verdict."""
    if key not in _STATE.known():
        _STATE.warm_up()


def scan_files(root: Path, files: Iterable[tuple[str, StatKey]]) -> tuple[dict[str, Hit], dict[str, str]]:
    """Scan the regular files `files` (relative path, `stat_key`) below `root`: the first secret in each
    file that holds one, and why each file that could not be scanned was not.

    Raises:
        TaskError: the scanner's rules cannot be loaded.
    """
    hits: dict[str, Hit] = {}
    unscannable: dict[str, str] = {}
    known = _STATE.known()
    with _Folders(root) as folders:
        for rel, key in sorted(files, key=lambda item: item[0].rpartition("/")[0]):
            if key in known:
                stored = known[key]
                if stored is not None:
                    hits[rel] = Hit(str(stored[0]), int(str(stored[1])))
                continue
            try:
                hit, read_key = _scan_file(folders, rel)
            except (OSError, UnsafePathError) as exc:
                unscannable[rel] = f"could not be read to check it for secrets ({exc.__class__.__name__})"
                continue
            except TimeoutError:
                unscannable[rel] = f"its check for secrets did not finish in {SCAN_TIMEOUT:.0f} s"
                continue
            if read_key == key and not _racy(key):  # kept only for the version lstat saw, once settled
                with _STATE.store_lock:
                    known[key] = None if hit is None else [hit.rule, hit.line]
                    _STATE.changed = True
            if hit is not None:
                hits[rel] = hit
    _save_verdicts()
    return hits, unscannable


class _Folders:
    """The folder of the file being read, opened once for all its files (`checks.dir_beneath`: no link
    followed on the way), then each file opened in it with O_NOFOLLOW. Files come sorted by folder, so
    one folder is open at a time."""

    def __init__(self, root: Path) -> None:
        self.root = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self.name: str | None = None
        self.fd = -1

    def __enter__(self) -> _Folders:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        os.close(self.root)

    def open(self, rel: str) -> int:
        folder, _, name = rel.rpartition("/")
        if folder != self.name:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd, self.name = -1, None
            self.fd = checks.dir_beneath(self.root, folder)
            self.name = folder
        return os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)


def _racy(key: StatKey) -> bool:
    """Whether the file was changed too recently for its key to tell a later change apart (file times
    have a coarse clock): its verdict is not kept, and the file is scanned again next time (git's
    "racily clean" rule)."""
    *_, mtime_ns, ctime_ns = key.split(":")
    return time.time_ns() - max(int(mtime_ns), int(ctime_ns)) < RACY_NS


def _scan_file(folders: _Folders, rel: str) -> tuple[Hit | None, StatKey]:
    """The first secret in `rel`, read and scanned `WINDOW` bytes at a time (each overlapping the last),
    and the key of the file as it was read."""
    with os.fdopen(folders.open(rel), "rb", buffering=0) as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(f"{rel} is not a regular file")
        carry = b""
        lines_before = 0                             # newlines in the file before `carry` starts
        asked = min(WINDOW, info.st_size + 1)        # a small file is read whole, into a buffer its size
        while True:
            block = f.read(asked) or b""
            if not block:
                return None, stat_key(info)
            if not carry and b"\0" in block[:BINARY_PROBE] and not block.startswith(_BOMS):
                return None, stat_key(info)          # binary: not scanned (see the module's docstring)
            data = carry + block
            hit = _first(_STATE.scanner_now(), data, lines_before)
            if hit is not None or len(block) < asked:
                return hit, stat_key(info)
            asked = WINDOW
            carry = data[-OVERLAP:]
            lines_before += data.count(b"\n", 0, len(data) - len(carry))


def _first(scanner: Scanner, data: bytes, lines_before: int) -> Hit | None:
    found = [f for f in scanner.scan(data, timeout=SCAN_TIMEOUT) if f.visible and not _placeholder(f)]
    if not found:
        return None
    first = min(found, key=lambda f: (f.location.get("line", 0), f.rule_id))
    return Hit(first.rule_id, lines_before + int(first.location.get("line", 1)))


def _verdicts_file() -> Path:
    return cache_dir() / "secret-scan" / "verdicts.json"


def _load_verdicts() -> dict[StatKey, list[object] | None]:
    """The stored verdicts, or none when the file is missing, unreadable or made by other rules."""
    try:
        stored = json.loads(checks.read_beneath(_verdicts_file().parent, _verdicts_file().name,
                                                limit=64 * 1024 * 1024))
    except (OSError, UnsafePathError, ValueError):
        return {}
    if not isinstance(stored, dict) or stored.get("rules") != RULES_VERSION:
        return {}
    verdicts = stored.get("verdicts")
    if not isinstance(verdicts, dict):
        return {}
    return {k: v for k, v in verdicts.items()
            if isinstance(k, str) and (v is None or (isinstance(v, list) and len(v) == 2
                                                     and isinstance(v[0], str) and isinstance(v[1], int)))}


def _save_verdicts() -> None:
    """Store the verdicts (rule ids and line numbers only) if any is new; a failure only costs a rescan."""
    with _STATE.store_lock:
        if not _STATE.changed or _STATE.verdicts is None:
            return
        if len(_STATE.verdicts) > _CACHE_LIMIT:
            _STATE.verdicts.clear()
        text = json.dumps({"rules": RULES_VERSION, "verdicts": _STATE.verdicts})
        _STATE.changed = False
    try:
        folder = checks.private_dir(_verdicts_file().parent)
        temporary = folder / f".verdicts.{os.getpid()}.{threading.get_ident()}"
        checks.write_file(temporary, text)
        os.replace(temporary, _verdicts_file())
    except (OSError, UnsafePathError):               # the cache is not kept; the next selection scans again
        with _STATE.store_lock:
            _STATE.changed = True


def _placeholder(finding: Finding) -> bool:
    """Whether a finding of a rule in `PLACEHOLDER_RULES` matched a documentation placeholder (the
    password of `redis://username:password@host`). The value is compared here and never kept."""
    if finding.rule_id not in PLACEHOLDER_RULES:
        return False
    value = str(finding.secret).strip().lower()
    return value in PLACEHOLDERS or re.fullmatch(r"<[^>]*>|\$\{?\w+}?|\{\{?[^}]*}}?|%\(?\w+\)?s?%?|[x*.]+",
                                                  value) is not None
