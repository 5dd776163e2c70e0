"""Session edit state: file fingerprints, applied idempotency keys, and per-file locks.

`EditState` remembers, for this session, the SHA-256 of each file as last read or written through
the tools (the compare-and-swap reference), and every editing call already applied, by key, with
its result. It lives in `ToolContext.edit_state`, is loaded on first use (`load_once`) and is kept
inside the sandbox under
`STATE_DIR/edits-<session>/`: `fingerprints.json`, and one small file per applied key in `keys/`
(so an edit reads and writes a few hundred bytes of state however long the session is). A harness process
that resumes the session with the same sandbox sees the same fingerprints and keys.

The texts of recently edited files are cached in memory by fingerprint, so an edit of a file the
session already holds reads only its SHA-256 from the sandbox, not its content.

`file_lock` serialises check-and-write per file among writers that go through the tools of this
process. The agent's own shell does not take it: a shell command that rewrites a file between our
read and our write is caught by the sandbox's `write_file(expect_sha256=...)` (the write is refused
as a conflict), but a shell write that lands after our write is simply a later write.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox.api import STATE_DIR, Sandbox

TEXT_CACHE_FILES = 16


@dataclass(frozen=True)
class Applied:
    tool: str
    args_sha256: str
    result: str


@dataclass
class EditState:
    folder: str = ""           # STATE_DIR/edits-<session>, set by load_once
    fingerprints: dict[str, str] = field(default_factory=dict)   # realpath -> sha256
    applied: dict[str, Applied] = field(default_factory=dict)    # idempotency key -> outcome
    resumed: bool = False      # state was found in the sandbox: keys may be stored there
    loaded: bool = False       # load_once has run
    texts: OrderedDict[str, tuple[str, str]] = field(default_factory=OrderedDict)  # realpath -> (sha, text)

    def load_once(self, sandbox: Sandbox, session: str) -> EditState:
        """This state, read from the sandbox on first use (a resumed session finds its fingerprints there)."""
        if self.loaded:
            return self
        with _LOCKS_GUARD:
            if not self.loaded:
                self.folder = state_folder(session)
                try:
                    self.fingerprints = dict(json.loads(sandbox.read_file(f"{self.folder}/fingerprints.json").data))
                    self.resumed = True
                except FileNotFoundError:
                    pass
                self.loaded = True
        return self

    def record(self, realpath: str, sha256: str, text: str | None = None) -> None:
        self.fingerprints[realpath] = sha256
        if text is not None:
            self.texts[realpath] = (sha256, text)
            self.texts.move_to_end(realpath)
            while len(self.texts) > TEXT_CACHE_FILES:
                self.texts.popitem(last=False)

    def forget(self, realpath: str) -> None:
        self.fingerprints.pop(realpath, None)
        self.texts.pop(realpath, None)

    def cached_text(self, realpath: str, sha256: str) -> str | None:
        sha, text = self.texts.get(realpath, ("", ""))
        return text if sha == sha256 else None

    def save(self, sandbox: Sandbox) -> None:
        sandbox.write_file(f"{self.folder}/fingerprints.json", json.dumps(self.fingerprints, indent=1).encode())

    def lookup(self, sandbox: Sandbox, key: str) -> Applied | None:
        """The outcome of `key` if applied in this session (asks the sandbox when not in memory)."""
        if key not in self.applied and self.resumed:
            try:
                data = json.loads(sandbox.read_file(f"{self.folder}/keys/{_key_file(key)}").data)
            except FileNotFoundError:
                return None
            self.applied[key] = Applied(data["tool"], data["args_sha256"], data["result"])
        return self.applied.get(key)

    def remember(self, sandbox: Sandbox, key: str, applied: Applied) -> None:
        self.applied[key] = applied
        body = json.dumps({"key": key, **asdict(applied)}).encode()
        sandbox.write_file(f"{self.folder}/keys/{_key_file(key)}", body)


def _key_file(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:40] + ".json"


def state_folder(session: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session) or "session"
    return f"{STATE_DIR}/edits-{safe}"


def args_fingerprint(tool: str, args: dict[str, Any]) -> str:
    """What identifies a call for idempotency: the tool and its arguments except the key."""
    body = {k: v for k, v in args.items() if k != "key"}
    return hashlib.sha256(json.dumps([tool, body], sort_keys=True).encode()).hexdigest()


_LOCKS: dict[tuple[int, str], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextmanager
def file_lock(sandbox: Sandbox, paths: Iterable[str]) -> Iterator[None]:
    """Hold the locks of `paths` in this sandbox (taken in sorted order, so never deadlocks)."""
    with ExitStack() as stack:
        for path in sorted(set(paths)):
            with _LOCKS_GUARD:
                lock = _LOCKS.setdefault((id(sandbox), path), threading.Lock())
            stack.enter_context(lock)
        yield
