"""SQLite details the harness's databases share (the approval queue, the find_code cache)."""

from __future__ import annotations

import sqlite3

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed


def _busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def use_wal(db: sqlite3.Connection, wait_seconds: float = 30.0) -> None:
    """Put `db` in WAL mode. Two processes opening a new database together both switch it, and SQLite
    then answers one of them "database is locked" at once, without its busy handler (two `harness mcp`
    servers started together on one state folder: one failed to start); ask again until
    `wait_seconds` have passed.

    Raises:
        sqlite3.Error: another error, or still locked after `wait_seconds`.
    """
    for attempt in Retrying(retry=retry_if_exception(_busy), stop=stop_after_delay(wait_seconds),
                            wait=wait_fixed(0.05), reraise=True):
        with attempt:
            db.execute("PRAGMA journal_mode=WAL")
