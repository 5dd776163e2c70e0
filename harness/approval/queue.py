"""The approval queue: one SQLite database (WAL mode) shared by sessions, the CLI and the web page.

State machine of a request (every transition is one conditional UPDATE, so two processes can never
both make the same move; each is also appended to the audit log in the same transaction):

    pending ──approve──> approved ──claim──> executing ──finish──> done | failed
       │ └──deny──> denied
       └──timeout──> expired ──same key asked again──> pending

A request is identified by (tool, key). `request_hash` covers exactly what will run (the resolved
arguments and the preview the human reads); approving records that hash, and only a request whose
stored arguments still hash to it can be claimed for execution.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from harness.approval.records import TERMINAL, AuditEvent, Request, canonical_hash, process_id
from harness.errors import ApprovalError

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL, tool TEXT NOT NULL, key TEXT NOT NULL,
    call_hash TEXT NOT NULL, args TEXT NOT NULL, preview TEXT NOT NULL, request_hash TEXT NOT NULL,
    status TEXT NOT NULL, created_at REAL NOT NULL,
    decided_at REAL, decided_by TEXT, reason TEXT, rule TEXT, approved_hash TEXT,
    started_at REAL, executor TEXT, finished_at REAL, result TEXT,
    UNIQUE (tool, key));
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, request_id INTEGER NOT NULL,
    event TEXT NOT NULL, actor TEXT NOT NULL, detail TEXT NOT NULL);
"""
DB_NAME = "approvals.sqlite3"


class ApprovalQueue:
    """Open with `ApprovalQueue(state_dir)`; one connection per object, safe across processes."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self.path = self.state_dir / DB_NAME
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                       check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=30000")
            self._db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ApprovalError(f"cannot open the approval queue in {self.state_dir}: {exc}; expected a "
                                "writable directory, e.g. `--state-dir ~/.local/state/harness`") from exc

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE) so concurrent writers queue up."""
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

    def _audit(self, db: sqlite3.Connection, request_id: int, event: str, actor: str, **detail: Any) -> None:
        db.execute("INSERT INTO audit (at, request_id, event, actor, detail) VALUES (?, ?, ?, ?, ?)",
                   (time.time(), request_id, event, actor, json.dumps(detail, sort_keys=True)))

    # -- reading -------------------------------------------------------------------------------
    def get(self, request_id: int) -> Request:
        row = self._db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        if row is None:
            raise ApprovalError(f"no approval request #{request_id} in {self.path}; "
                                "`harness approvals list` shows the ones that exist")
        return Request.from_row(row)

    def find(self, tool: str, key: str) -> Request | None:
        row = self._db.execute("SELECT * FROM requests WHERE tool = ? AND key = ?", (tool, key)).fetchone()
        return None if row is None else Request.from_row(row)

    def list(self, statuses: tuple[str, ...] = (), limit: int = 200) -> list[Request]:
        sql, params = "SELECT * FROM requests", []
        if statuses:
            sql += f" WHERE status IN ({','.join('?' * len(statuses))})"
            params = list(statuses)
        rows = self._db.execute(sql + " ORDER BY id DESC LIMIT ?", (*params, limit)).fetchall()
        return [Request.from_row(r) for r in rows]

    def audit(self, since: int = 0) -> list[AuditEvent]:
        rows = self._db.execute("SELECT * FROM audit WHERE id > ? ORDER BY id", (since,)).fetchall()
        return [AuditEvent.from_row(r) for r in rows]

    def version(self) -> int:
        """Grows with every change; the web page polls it."""
        return int(self._db.execute("SELECT COALESCE(MAX(id), 0) FROM audit").fetchone()[0])

    # -- writing -------------------------------------------------------------------------------
    def submit(self, *, session: str, tool: str, key: str, call_args: dict[str, Any],
               args: dict[str, Any], preview: str) -> tuple[Request, bool]:
        """Queue a request, or return the one already holding (tool, key). True when created."""
        call_hash = canonical_hash(call_args)
        request_hash = canonical_hash({"tool": tool, "args": args, "preview": preview})
        with self._tx() as db:
            row = db.execute("SELECT * FROM requests WHERE tool = ? AND key = ?", (tool, key)).fetchone()
            if row is not None and row["status"] != "expired":
                return Request.from_row(row), False
            values = (session, call_hash, json.dumps(args, sort_keys=True), preview, request_hash, time.time())
            if row is None:
                cur = db.execute(
                    "INSERT INTO requests (session, tool, key, call_hash, args, preview, request_hash,"
                    " status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
                    (values[0], tool, key, *values[1:]))
                request_id = int(cur.lastrowid or 0)
            else:
                request_id = int(row["id"])
                db.execute("UPDATE requests SET session=?, call_hash=?, args=?, preview=?, request_hash=?,"
                           " status='pending', created_at=?, decided_at=NULL, decided_by=NULL, reason=NULL,"
                           " rule=NULL, approved_hash=NULL WHERE id=?", (*values, request_id))
            self._audit(db, request_id, "submitted", f"session:{session}", tool=tool, key=key,
                        request_hash=request_hash)
        return self.get(request_id), True

    def decide(self, request_id: int, approve: bool, actor: str, reason: str = "",
               rule: str | None = None, seen_hash: str | None = None) -> Request:
        """Approve or deny a pending request. `seen_hash`: the hash of what the decider was shown."""
        status = "approved" if approve else "denied"
        with self._tx() as db:
            current = self.get(request_id)
            if current.status != "pending":
                raise ApprovalError(
                    f"request #{request_id} is already {current.status}"
                    + (f" (by {current.decided_by})" if current.decided_by else "")
                    + "; only a pending request can be approved or denied")
            if seen_hash is not None and seen_hash != current.request_hash:
                raise ApprovalError(f"request #{request_id} is not the one you saw: its hash is "
                                    f"{current.request_hash[:12]}, you saw {seen_hash[:12]}; reload it")
            db.execute("UPDATE requests SET status=?, decided_at=?, decided_by=?, reason=?, rule=?,"
                       " approved_hash=? WHERE id=? AND status='pending'",
                       (status, time.time(), actor, reason, rule,
                        current.request_hash if approve else None, request_id))
            self._audit(db, request_id, status, actor, reason=reason, rule=rule,
                        request_hash=current.request_hash)
        return self.get(request_id)

    def expire(self, request_id: int, waited: float) -> Request:
        with self._tx() as db:
            cur = db.execute("UPDATE requests SET status='expired', decided_at=?, decided_by='timeout',"
                             " reason=? WHERE id=? AND status='pending'",
                             (time.time(), f"no decision within {waited:.0f} s", request_id))
            if cur.rowcount:
                self._audit(db, request_id, "expired", "timeout", waited_seconds=round(waited, 1))
        return self.get(request_id)

    def claim(self, request_id: int) -> Request | None:
        """Move an approved request to `executing` (recorded before anything is sent). None: lost."""
        executor = process_id()
        with self._tx() as db:
            row = db.execute("SELECT * FROM requests WHERE id=?", (request_id,)).fetchone()
            req = Request.from_row(row)
            if req.status != "approved":
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


__all__ = ["ApprovalQueue", "Request", "AuditEvent", "TERMINAL"]
