"""The approval database on disk: its schema, its files (0600, in a 0700 state folder, never opened
through a link: they hold what the model sent), its opening (WAL mode, a busy timeout) and the
migrations that bring a database made by an older harness up to date. What is read and written in it,
in which transaction, is `harness.approval.queue`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.checks import private_dir
from harness.core.sqlite import use_wal
from harness.errors import ApprovalError, UnsafePathError

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL, tool TEXT NOT NULL, key TEXT NOT NULL,
    call_hash TEXT NOT NULL, args TEXT NOT NULL, preview TEXT NOT NULL, request_hash TEXT NOT NULL,
    status TEXT NOT NULL, created_at REAL NOT NULL,
    decided_at REAL, decided_by TEXT, reason TEXT, rule TEXT, approved_hash TEXT,
    started_at REAL, executor TEXT, finished_at REAL, result TEXT);
CREATE TABLE IF NOT EXISTS grants (
    id INTEGER PRIMARY KEY AUTOINCREMENT, decision TEXT NOT NULL, tool TEXT NOT NULL, rule TEXT NOT NULL,
    rule_text TEXT NOT NULL, scope_kind TEXT NOT NULL, scope TEXT NOT NULL, session TEXT NOT NULL,
    expires_at REAL, created_at REAL NOT NULL, granted_by TEXT NOT NULL, from_request INTEGER NOT NULL,
    preview_hash TEXT NOT NULL, revoked_at REAL, revoked_by TEXT, decided INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, request_id INTEGER NOT NULL,
    event TEXT NOT NULL, actor TEXT NOT NULL, detail TEXT NOT NULL);
"""
OLD_UNIQUE = "UNIQUE (tool, key)"      # databases made before an expired name could be asked anew
SCOPED = """CREATE UNIQUE INDEX IF NOT EXISTS requests_open_scoped_name ON requests (tool, scope, key)
    WHERE status != 'expired'"""          # a key names one action of one scope (a session, or a run)
DB_NAME = "approvals.sqlite3"


def _private_files(db: Path) -> None:
    """The database (created if missing) and its WAL/SHM companions: 0600, never through a link.
    SQLite creates the companions with the database's mode.

    An existing file is only chmod-ed, never opened: closing any descriptor of a file drops every
    POSIX lock this process holds on it, so opening the database here while another connection of
    this process has it open would leave that connection unlocked and reading a stale snapshot."""
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if os.path.islink(path):
            raise UnsafePathError(f"refusing {path}: it is a symbolic link (to {os.readlink(path)!r}); "
                                  "the approval database is never opened through a link")
        if os.path.lexists(path):
            os.chmod(path, 0o600)
        elif path == db:    # nothing of this process can hold it open yet
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            except FileExistsError:
                os.chmod(path, 0o600)   # another process created it meanwhile


def open_database(state_dir: Path, path: Path) -> sqlite3.Connection:
    """The database `path` in `state_dir` (both made if missing), open, its schema up to date.

    Raises:
        ApprovalError: the folder or the database cannot be made or opened, or a file is a link.
    """
    try:
        private_dir(state_dir)
        _private_files(path)
        db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        use_wal(db)
        db.execute("PRAGMA busy_timeout=30000")
        _migrate(db, path)
        db.executescript(SCHEMA)
        _add_scope(db, path)
        _add_grant_column(db, path)
    except (OSError, sqlite3.Error) as exc:
        raise ApprovalError(f"cannot open the approval queue in {state_dir}: {exc}; expected a "
                            "writable directory, e.g. `--state-dir ~/.local/state/harness`") from exc
    return db


@contextmanager
def _immediate(db: sqlite3.Connection, path: Path) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken at once (BEGIN IMMEDIATE), as the queue's own are."""
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise ApprovalError(f"the approval database {path} is unavailable: {exc}") from exc
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    """Rebuild a `requests` table made with UNIQUE (tool, key) (same columns, partial index after)."""
    def old() -> bool:
        row = db.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name='requests'").fetchone()
        return row is not None and OLD_UNIQUE in row[0]
    if not old():
        return
    with _immediate(db, path):
        if not old():         # another process migrated it meanwhile
            return
        db.execute("ALTER TABLE requests RENAME TO requests_before_migration")
        db.execute(SCHEMA.split(";")[0])
        db.execute("INSERT INTO requests SELECT * FROM requests_before_migration")
        db.execute("DROP TABLE requests_before_migration")


def _add_scope(db: sqlite3.Connection, path: Path) -> None:
    """The `scope` column (whose keys: a session's, or a run's) and the index naming a request by
    (tool, scope, key), added to a database made before keys had a scope (theirs: scope '')."""
    def has() -> bool:
        return any(r["name"] == "scope" for r in db.execute("PRAGMA table_info(requests)"))
    if has() and db.execute("SELECT 1 FROM sqlite_master WHERE name='requests_open_scoped_name'").fetchone():
        return
    with _immediate(db, path):
        if not has():
            db.execute("ALTER TABLE requests ADD COLUMN scope TEXT NOT NULL DEFAULT ''")
        db.execute("DROP INDEX IF EXISTS requests_open_name")
        db.execute(SCOPED)


def _add_grant_column(db: sqlite3.Connection, path: Path) -> None:
    """`requests.grant_id` (the grant that decided it), added to a database made before grants."""
    def has() -> bool:
        return any(r["name"] == "grant_id" for r in db.execute("PRAGMA table_info(requests)"))
    if has():
        return
    with _immediate(db, path):
        if not has():
            db.execute("ALTER TABLE requests ADD COLUMN grant_id INTEGER")
