"""The approval queue: one SQLite database (WAL mode) shared by sessions, the CLI and the web page.

State machine of a request (every transition is one conditional UPDATE, so two processes can never
both make the same move; each is also appended to the audit log in the same transaction):

    pending ──approve──> approved ──claim──> executing ──finish──> done | failed
       │ └──deny──> denied
       └──timeout──> expired      (final: the same key asked again is a new request with a new id)
         (or withdrawn: the asking session ended before a decision, recorded as expired with why)

A request is named by (tool, scope, key): a key belongs to one scope (an MCP session, or a run and its
resumes), so another session's key never reaches it; at most one request per name is not expired. `request_hash`
covers exactly what will run (the resolved arguments and the preview the human reads); every
decision from a human names the hash of what they were shown and is refused if it differs, and only
a request whose stored arguments still hash to the approved value can be claimed for execution.

Grants (`harness.approval.grants`) live in the same database, so a request is decided by a grant in
one transaction with the grant's state: a revoked grant decides nothing after its revocation commits.

The database itself (its schema, its files, opening it, bringing an older one up to date) is
`harness.approval.database`; every statement that writes a request or a grant is here, next to its
transaction.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.approval.database import DB_NAME, open_database
from harness.approval.grants import GrantRule, covers, derive, narrow
from harness.approval.records import (
    TERMINAL,
    AuditEvent,
    DecisionRefused,
    Grant,
    GrantScope,
    Request,
    UnknownRequest,
    canonical_hash,
    process_id,
)
from harness.errors import ApprovalError
from sandbox.text import escape_ident


class ApprovalQueue:
    """Open with `ApprovalQueue(state_dir)`; one connection per object, safe across processes, and across
    threads: one `harness mcp --http` serves many sessions' calls, and `harness web` many browsers',
    through one queue, and a connection holds one transaction at a time (a second thread's BEGIN had
    failed with "cannot start a transaction within a transaction"), so each use of it is taken in turn."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self._lock = threading.RLock()
        self.path = self.state_dir / DB_NAME
        self._db = open_database(self.state_dir, self.path)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE) so concurrent writers queue up: other
        processes in SQLite's lock, this process's other threads in `_lock`."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise ApprovalError(f"the approval database {self.path} is unavailable: {exc}") from exc
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """A read, between this process's other threads' transactions, never inside one."""
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _audit(self, db: sqlite3.Connection, request_id: int, event: str, actor: str, **detail: Any) -> None:
        db.execute("INSERT INTO audit (at, request_id, event, actor, detail) VALUES (?, ?, ?, ?, ?)",
                   (time.time(), request_id, event, actor, json.dumps(detail, sort_keys=True)))

    # -- reading -------------------------------------------------------------------------------
    def get(self, request_id: int) -> Request:
        row = next(iter(self._rows("SELECT * FROM requests WHERE id = ?", (request_id,))), None)
        if row is None:
            raise UnknownRequest(f"no approval request #{request_id} in {self.path}; "
                                 "`harness approvals list --all` shows the ones that exist", request_id=request_id)
        return Request.from_row(row)

    def find(self, tool: str, key: str, scope: str | None = None) -> Request | None:
        """The latest request named (tool, key) in `scope` (None: in any): the open one, else the last that
        expired."""
        sql, params = "SELECT * FROM requests WHERE tool = ? AND key = ?", [tool, key]
        if scope is not None:
            sql, params = sql + " AND scope = ?", [*params, scope]
        row = next(iter(self._rows(sql + " ORDER BY id DESC LIMIT 1", tuple(params))), None)
        return None if row is None else Request.from_row(row)

    def requests(self, statuses: tuple[str, ...] = (), limit: int = 200) -> list[Request]:
        """The latest `limit` requests, newest first (only those in `statuses`, when given)."""
        sql, params = "SELECT * FROM requests", []
        if statuses:
            sql += f" WHERE status IN ({','.join('?' * len(statuses))})"
            params = list(statuses)
        return [Request.from_row(r) for r in self._rows(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))]

    def audit(self, since: int = 0) -> list[AuditEvent]:
        return [AuditEvent.from_row(r) for r in self._rows("SELECT * FROM audit WHERE id > ? ORDER BY id", (since,))]

    def version(self) -> int:
        """Grows with every change; the web page polls it."""
        return int(self._rows("SELECT COALESCE(MAX(id), 0) FROM audit")[0][0])

    # -- writing -------------------------------------------------------------------------------
    def submit(self, *, session: str, tool: str, key: str, call_args: dict[str, Any],
               args: dict[str, Any], preview: str, scope: str = "") -> tuple[Request, bool]:
        """Queue a request, or return the open one already named (tool, scope, key). True when created.
        A name whose last request expired gets a new request (new id); the expired one stays as it was."""
        call_hash = canonical_hash(call_args)
        request_hash = canonical_hash({"tool": tool, "args": args, "preview": preview})
        with self._tx() as db:
            row = db.execute("SELECT * FROM requests WHERE tool = ? AND scope = ? AND key = ? ORDER BY id DESC "
                             "LIMIT 1", (tool, scope, key)).fetchone()
            if row is not None and row["status"] != "expired":
                return Request.from_row(row), False
            cur = db.execute(
                "INSERT INTO requests (session, scope, tool, key, call_hash, args, preview, request_hash,"
                " status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
                (session, scope, tool, key, call_hash, json.dumps(args, sort_keys=True), preview, request_hash,
                 time.time()))
            request_id = int(cur.lastrowid or 0)
            earlier = {} if row is None else {"asked_again_after": int(row["id"])}
            self._audit(db, request_id, "submitted", f"session:{session}", tool=tool, key=key,
                        request_hash=request_hash, **earlier)
        return self.get(request_id), True

    def _decidable(self, request_id: int, approve: bool, seen_hash: str | None, rule: str | None) -> Request:
        """The pending request, checked for this decision (inside the caller's transaction)."""
        current = self.get(request_id)
        if current.status != "pending":
            raise DecisionRefused(
                f"request #{request_id} is already {current.status}"
                + (f" (by {escape_ident(current.decided_by)})" if current.decided_by else "")
                + "; only a pending request can be approved or denied", request_id=request_id,
                status=current.status, why="decided")
        if approve and seen_hash is None and rule is None:
            raise DecisionRefused(
                f"request #{request_id}: an approval must name the hash of the request it approves; "
                f"`harness approvals show {request_id}` prints it, then e.g. `harness approvals approve "
                f"{request_id} --hash {current.request_hash}`", request_id=request_id,
                status=current.status, why="unseen")
        if seen_hash is not None and seen_hash != current.request_hash:
            raise DecisionRefused(
                f"request #{request_id} is not the one you saw: its hash is {current.request_hash}, you saw "
                f"{escape_ident(seen_hash[:80])!r}; look at it again (`harness approvals show {request_id}`) "
                "and decide on what it holds now", request_id=request_id, status=current.status,
                why="changed")
        return current

    def _set_decision(self, db: sqlite3.Connection, current: Request, approve: bool, actor: str, reason: str,
                      rule: str | None, grant_id: int | None = None, **detail: Any) -> None:
        status = "approved" if approve else "denied"
        db.execute("UPDATE requests SET status=?, decided_at=?, decided_by=?, reason=?, rule=?,"
                   " approved_hash=?, grant_id=? WHERE id=? AND status='pending'",
                   (status, time.time(), actor, reason, rule, current.request_hash if approve else None,
                    grant_id, current.id))
        self._audit(db, current.id, status, actor, reason=reason, rule=rule,
                    request_hash=current.request_hash, **detail)

    def decide(self, request_id: int, approve: bool, actor: str, reason: str = "",
               rule: str | None = None, seen_hash: str | None = None) -> Request:
        """Approve or deny a pending request. `seen_hash`: the full hash of what the decider was shown;
        required to approve unless the decider is a policy rule (`rule` given), which saw the arguments."""
        with self._tx() as db:
            current = self._decidable(request_id, approve, seen_hash, rule)
            self._set_decision(db, current, approve, actor, reason, rule)
        return self.get(request_id)

    # -- grants (harness.approval.grants) ------------------------------------------------------
    def derive_grant(self, request_id: int, approve: bool, narrowings: tuple[tuple[str, str], ...] = ()
                     ) -> GrantRule:
        """The rule a grant made from this request would have (raises NotGrantable, ApprovalError)."""
        request = self.get(request_id)
        rule = derive(request.tool, request.args, "approve" if approve else "deny")
        for key, pattern in narrowings:
            rule = narrow(rule, key, pattern)
        return rule

    def decide_with_grant(self, request_id: int, approve: bool, actor: str, *, seen_hash: str, shown_rule: GrantRule,
                          scope_kind: GrantScope, expires_at: float | None = None, reason: str = "",
                          narrowings: tuple[tuple[str, str], ...] = ()) -> tuple[Request, Grant]:
        """Decide the request a person saw (hash `seen_hash`) and make a grant of the rule they were shown
        (derived again here from the stored request: it must be `shown_rule`), in one transaction."""
        with self._tx() as db:
            current = self._decidable(request_id, approve, seen_hash, None)
            rule = self.derive_grant(request_id, approve, narrowings)
            if rule != shown_rule:
                raise DecisionRefused(f"request #{request_id}: the grant's rule is not the one shown; nothing "
                                      "was decided", request_id=request_id, status=current.status, why="changed")
            cur = db.execute(
                "INSERT INTO grants (decision, tool, rule, rule_text, scope_kind, scope, session, expires_at,"
                " created_at, granted_by, from_request, preview_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (rule.decision, rule.tool, rule.to_json(), rule.text(), scope_kind, current.scope, current.session,
                 expires_at, time.time(), actor, request_id, current.request_hash))
            grant_id = int(cur.lastrowid or 0)
            self._set_decision(db, current, approve, actor, reason, None, made_grant=grant_id,
                               grant_rule=rule.text(), grant_scope=scope_kind)
        return self.get(request_id), self.grant(grant_id)

    def grant(self, grant_id: int) -> Grant:
        row = next(iter(self._rows("SELECT * FROM grants WHERE id = ?", (grant_id,))), None)
        if row is None:
            raise ApprovalError(f"no grant G{grant_id} in {self.path}; `harness approvals grants` lists them")
        return Grant.from_row(row)

    def grants(self) -> list[Grant]:
        return [Grant.from_row(r) for r in self._rows("SELECT * FROM grants ORDER BY id DESC")]

    def decide_by_grant(self, request_id: int, decisions: tuple[str, ...] = ("deny", "approve")) -> Request | None:
        """Decide a pending request by the first active grant of `decisions` covering it (deny grants
        first), in one transaction with the grant's state; None when none covers it."""
        with self._tx() as db:
            current = self.get(request_id)
            if current.status != "pending":
                return None
            now = time.time()
            rows = db.execute("SELECT * FROM grants WHERE revoked_at IS NULL AND tool = ? "
                              "ORDER BY decision = 'approve', id", (current.tool,)).fetchall()
            for grant in (Grant.from_row(r) for r in rows if r["decision"] in decisions):
                if grant.active(now) and grant.applies_to(current) and covers(
                        GrantRule.from_json(grant.rule), current.tool, current.args):
                    approve = grant.decision == "approve"
                    reason = (f"{'approved' if approve else 'denied'} by grant G{grant.id} ({grant.rule_text}; "
                              f"granted by {grant.granted_by} from request #{grant.from_request})")
                    self._set_decision(db, current, approve, f"grant:G{grant.id}", reason, None, grant.id,
                                       grant=grant.id)
                    db.execute("UPDATE grants SET decided = decided + 1 WHERE id = ?", (grant.id,))
                    break
            else:
                return None
        return self.get(request_id)

    def revoke(self, grant_id: int, actor: str) -> Grant:
        """End a grant at once: it decides nothing more, and a request it approved that was not claimed
        yet does not run (one already executing finishes, once)."""
        with self._tx() as db:
            grant = self.grant(grant_id)
            if grant.revoked_at is not None:
                return grant
            db.execute("UPDATE grants SET revoked_at=?, revoked_by=? WHERE id=?", (time.time(), actor, grant_id))
            self._audit(db, grant.from_request, "grant-revoked", actor, grant=grant_id)
        return self.grant(grant_id)

    def expire(self, request_id: int, waited: float) -> Request:
        """No decision in time: a pending request expires (one decided meanwhile is returned as it is)."""
        return self._expire(request_id, "timeout", f"no decision within {waited:.0f} s",
                            waited_seconds=round(waited, 1))

    def withdraw(self, request_id: int, why: str) -> Request:
        """The session that asked ended before a decision: a pending request expires saying `why`, so no
        human approves what nothing will run (one decided meanwhile is returned as it is)."""
        return self._expire(request_id, "session-ended", why)

    def _expire(self, request_id: int, actor: str, reason: str, **detail: Any) -> Request:
        with self._tx() as db:
            cur = db.execute("UPDATE requests SET status='expired', decided_at=?, decided_by=?,"
                             " reason=? WHERE id=? AND status='pending'", (time.time(), actor, reason, request_id))
            if cur.rowcount:
                self._audit(db, request_id, "expired", actor, reason=reason, **detail)
        return self.get(request_id)

    def claim(self, request_id: int) -> Request | None:
        """Move an approved request to `executing` (recorded before anything is sent). None: lost."""
        executor = process_id()
        with self._tx() as db:
            req = self.get(request_id)
            if req.status != "approved":
                return None
            if req.grant_id is not None and self.grant(req.grant_id).revoked_at is not None:
                db.execute("UPDATE requests SET status='denied', reason=? WHERE id=? AND status='approved'",
                           (f"grant G{req.grant_id} was revoked before the request ran", request_id))
                self._audit(db, request_id, "denied", "revoked", grant=req.grant_id)
                return None
            if req.approved_hash != req.request_hash or canonical_hash(
                    {"tool": req.tool, "args": req.args, "preview": req.preview}) != req.approved_hash:
                raise ApprovalError(f"request #{request_id} no longer matches what was approved (approved "
                                    f"hash {str(req.approved_hash)[:12]}); it will not run")
            db.execute("UPDATE requests SET status='executing', started_at=?, executor=? "
                       "WHERE id=? AND status='approved'", (time.time(), executor, request_id))
            self._audit(db, request_id, "executing", executor, request_hash=req.request_hash)
        return self.get(request_id)

    def finish(self, request_id: int, ok: bool, result: str) -> Request:
        status = "done" if ok else "failed"
        with self._tx() as db:
            db.execute("UPDATE requests SET status=?, finished_at=?, result=? WHERE id=? AND "
                       "status='executing'", (status, time.time(), result, request_id))
            self._audit(db, request_id, status, process_id(), result_chars=len(result),
                        result_head=result[:200])
        return self.get(request_id)


__all__ = ["ApprovalQueue", "Request", "AuditEvent", "TERMINAL", "DecisionRefused", "UnknownRequest"]
