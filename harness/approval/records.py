"""The values stored in the approval queue: requests and audit events, how they are hashed, and the
errors a decision can meet (each carries its context as attributes, so no caller parses a message):

    ApprovalError (harness.errors)
    ├── UnknownRequest        no request has that id                       (.request_id)
    └── DecisionRefused       the request cannot take this decision        (.request_id, .status, .why)
                              why = "decided": it is no longer pending
                              why = "changed": it is not what the decider was shown (hash differs)
                              why = "unseen":  no hash of what was shown was given
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

from harness.errors import ApprovalError

RequestStatus = Literal["pending", "approved", "denied", "expired", "executing", "done", "failed"]
"""Where a request is in its life; the module docstring of harness/approval/queue.py draws the transitions."""
STATUSES: tuple[RequestStatus, ...] = get_args(RequestStatus)
TERMINAL: tuple[RequestStatus, ...] = ("denied", "done", "failed")


def canonical_hash(value: Any) -> str:
    """SHA-256 of the value's canonical JSON (sorted keys, no spaces)."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(data.encode()).hexdigest()


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (tells a reused pid from the original)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def process_id() -> str:
    """This process as `host:pid:start`, recorded as the executor of a request."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def process_alive(executor: str) -> bool | None:
    """Whether the executor process still runs; None when it ran on another host (cannot tell)."""
    host, _, rest = executor.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    return _start_ticks(int(pid_text)) == start and start != ""


class UnknownRequest(ApprovalError):
    def __init__(self, message: str, *, request_id: int) -> None:
        super().__init__(message)
        self.request_id = request_id


RefusedWhy = Literal["decided", "changed", "unseen"]


class DecisionRefused(ApprovalError):
    def __init__(self, message: str, *, request_id: int, status: RequestStatus, why: RefusedWhy) -> None:
        super().__init__(message)
        self.request_id, self.status, self.why = request_id, status, why


@dataclass(frozen=True)
class Request:
    id: int
    session: str
    tool: str
    key: str
    call_hash: str
    args: dict[str, Any]
    preview: str
    request_hash: str
    status: RequestStatus
    created_at: float
    decided_at: float | None
    decided_by: str | None
    reason: str | None
    rule: str | None
    approved_hash: str | None
    started_at: float | None
    executor: str | None
    finished_at: float | None
    result: str | None
    scope: str = ""          # whose key it is: a session, or a run and its resumes (harness.approval.gate)
    grant_id: int | None = None   # the grant that decided it (harness.approval.grants); None: a rule or a person

    @staticmethod
    def from_row(row: sqlite3.Row) -> Request:
        data = dict(row)
        data["args"] = json.loads(data["args"])
        return Request(**data)

    @property
    def outcome_unknown(self) -> bool:
        """`executing`, and the process that started it is gone: it may or may not have happened."""
        return self.status == "executing" and process_alive(self.executor or "") is False

    @property
    def shown_status(self) -> str:
        return "executing (outcome unknown, not retried)" if self.outcome_unknown else self.status

    def to_dict(self) -> dict[str, Any]:
        """For display (`--json`): everything the model sent, as stored. Operator credentials are not
        in `args` (only a reference to them), so nothing needs masking here."""
        data = asdict(self)
        data["outcome_unknown"] = self.outcome_unknown
        return data


GrantScope = Literal["run", "session", "until"]
"""How long a grant lasts: the run (its key scope, resumes too), the session that asked, or until a time
(every session of this queue until then)."""


@dataclass(frozen=True)
class Grant:
    """A decision a person made on request `from_request` (hash `preview_hash`), extended to the later
    requests its derived rule covers (`harness.approval.grants`)."""

    id: int
    decision: str            # approve | deny
    tool: str
    rule: str                # GrantRule JSON
    rule_text: str           # what the person was shown
    scope_kind: GrantScope
    scope: str               # the run's key scope (scope_kind run)
    session: str             # the session (scope_kind session)
    expires_at: float | None
    created_at: float
    granted_by: str
    from_request: int
    preview_hash: str
    revoked_at: float | None
    revoked_by: str | None
    decided: int             # how many requests it decided

    @staticmethod
    def from_row(row: sqlite3.Row) -> Grant:
        return Grant(**dict(row))

    def active(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    def applies_to(self, request: Request) -> bool:
        """Whether `request` is within this grant's scope (its rule is matched separately)."""
        if self.scope_kind == "run":
            return request.scope == self.scope
        if self.scope_kind == "session":
            return request.session == self.session
        return True

    @property
    def shown_scope(self) -> str:
        if self.scope_kind == "until":
            return "until " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.expires_at or 0))
        return f"this {self.scope_kind}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AuditEvent:
    id: int
    at: float
    request_id: int
    event: str
    actor: str
    detail: dict[str, Any]

    @staticmethod
    def from_row(row: sqlite3.Row) -> AuditEvent:
        data = dict(row)
        data["detail"] = json.loads(data["detail"])
        return AuditEvent(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
