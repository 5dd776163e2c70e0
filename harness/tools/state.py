"""Session edit state: file fingerprints, applied idempotency keys, and per-file locks.

`EditState` remembers, for this session, the SHA-256 of each file as last read or written through
the tools (the compare-and-swap reference), and every editing call already applied, by key, with
its result. It lives in `ToolContext.services["edit_state"]` and is saved as JSON inside the
sandbox under `STATE_DIR`, so a harness process that resumes the session with the same sandbox
sees the same fingerprints and keys.

`file_lock` serialises check-and-write per file among writers that go through the tools of this
process. The agent's own shell does not take it: a shell command that rewrites a file between our
read and our write is caught by the sandbox's `write_file(expect_sha256=...)` (the write is refused
as a conflict), but a shell write that lands after our write is simply a later write.
"""

from __future__ import annotations

import hashlib
import json
import threading
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from harness.tools.base import ToolContext
from sandbox.api import STATE_DIR, Sandbox

SERVICE = "edit_state"


@dataclass(frozen=True)
class Applied:
    tool: str
    args_sha256: str
    result: str


@dataclass
class EditState:
    path: str
    fingerprints: dict[str, str] = field(default_factory=dict)   # realpath -> sha256
    applied: dict[str, Applied] = field(default_factory=dict)    # idempotency key -> outcome

    def record(self, realpath: str, sha256: str) -> None:
        self.fingerprints[realpath] = sha256

    def forget(self, realpath: str) -> None:
        self.fingerprints.pop(realpath, None)

    def to_json(self) -> str:
        return json.dumps({"fingerprints": self.fingerprints,
                           "applied": {k: vars(v) for k, v in self.applied.items()}}, indent=1)

    @staticmethod
    def from_json(path: str, text: str) -> "EditState":
        data = json.loads(text)
        applied = {k: Applied(**v) for k, v in data.get("applied", {}).items()}
        return EditState(path, dict(data.get("fingerprints", {})), applied)

    def save(self, sandbox: Sandbox) -> None:
        sandbox.write_file(self.path, self.to_json().encode())


def state_path(session: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session) or "session"
    return f"{STATE_DIR}/edits-{safe}.json"


def edit_state(ctx: ToolContext) -> EditState:
    """This session's edit state: from the services, else loaded from the sandbox, else new."""
    state = ctx.services.get(SERVICE)
    if state is None:
        path = state_path(ctx.session)
        try:
            state = EditState.from_json(path, ctx.sandbox.read_file(path).data.decode())
        except FileNotFoundError:
            state = EditState(path)
        ctx.services[SERVICE] = state
    return state


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
