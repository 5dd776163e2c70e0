"""The state folder holds what the model sent: only its owner can read it, whatever the umask."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.approval.queue import ApprovalQueue
from harness.core.sqlite import use_wal
from harness.errors import UnsafePathError


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _fill(queue: ApprovalQueue) -> None:
    queue.submit(session="s", tool="http_request", key="k", call_args={"u": 1},
                 args={"headers": {"Authorization": "Bearer model-sent"}}, preview="p")


def test_a_new_state_folder_is_0700_and_the_database_files_0600_under_umask_022(tmp_path: Path,
                                                                                 umask_022: None) -> None:
    state = tmp_path / "home" / "state"
    queue = ApprovalQueue(state)
    _fill(queue)
    files = sorted(p.name for p in state.iterdir())
    assert files == ["approvals.sqlite3", "approvals.sqlite3-shm", "approvals.sqlite3-wal"]
    assert _mode(state) == 0o700
    assert {name: _mode(state / name) for name in files} == dict.fromkeys(files, 0o600)
    queue.close()
    plain = tmp_path / "plain"                    # positive control: the umask alone would give 0755
    plain.mkdir()
    assert _mode(plain) == 0o755


def test_an_existing_open_state_folder_is_closed_on_first_use(tmp_path: Path, umask_022: None) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    (state / "approvals.sqlite3").touch(mode=0o644)
    (state / "approvals.sqlite3-wal").touch(mode=0o644)
    assert _mode(state) == 0o755 and _mode(state / "approvals.sqlite3") == 0o644
    _fill(ApprovalQueue(state))
    assert _mode(state) == 0o700
    assert _mode(state / "approvals.sqlite3") == 0o600 and _mode(state / "approvals.sqlite3-wal") == 0o600


def test_a_database_path_planted_as_a_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    state, target = tmp_path / "state", tmp_path / "elsewhere.txt"
    state.mkdir(mode=0o700)
    target.write_text("keep me\n")
    (state / "approvals.sqlite3").symlink_to(target)
    before = _mode(target)
    with pytest.raises(UnsafePathError, match=r"approvals\.sqlite3: it is a symbolic link \(to '.*elsewhere\.txt'\)"):
        ApprovalQueue(state)
    assert target.read_text() == "keep me\n" and _mode(target) == before


WRITER = ("import sys; from pathlib import Path; from harness.approval.queue import ApprovalQueue; "
          "ApprovalQueue(Path(sys.argv[1])).submit(session='s', tool='t', key=sys.argv[2], call_args={}, "
          "args={}, preview='p')")


def test_a_second_queue_in_one_process_leaves_the_first_one_seeing_other_processes_writes(tmp_path: Path) -> None:
    # Several queues live in one process (eval workers' sessions, Reflexion attempts). Opening and closing
    # the database file to set its mode would drop this process's POSIX locks, and the first connection
    # would then read a stale snapshot: approvals given elsewhere would go unseen until the timeout.
    state = tmp_path / "state"
    first = ApprovalQueue(state)
    ApprovalQueue(state)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for key in ("k1", "k2", "k3"):
        subprocess.run([sys.executable, "-c", WRITER, str(state), key], check=True, env=env)
        ApprovalQueue(state).close()
        assert sorted(r.key for r in first.requests()) == sorted(["k1", "k2", "k3"][: int(key[1])])
    assert stat.S_IMODE((state / "approvals.sqlite3").stat().st_mode) == 0o600


class _LockedAtFirst:
    """A connection whose journal-mode switch is refused `times` times, as SQLite does when two
    processes switch a new database to WAL together."""

    def __init__(self, times: int, message: str = "database is locked") -> None:
        self.left, self.message, self.calls = times, message, 0

    def execute(self, sql: str) -> None:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise sqlite3.OperationalError(self.message)


def test_switching_to_wal_asks_again_while_another_process_holds_the_lock() -> None:
    db = _LockedAtFirst(3)
    use_wal(db)  # type: ignore[arg-type]
    assert db.calls == 4
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(_LockedAtFirst(10_000), wait_seconds=0.3)  # type: ignore[arg-type]
    other = _LockedAtFirst(1, "disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        use_wal(other)  # type: ignore[arg-type]
    assert other.calls == 1                      # any other error is not waited out


def test_servers_started_together_on_a_new_state_folder_all_open_the_queue(tmp_path: Path) -> None:
    code = "import sys; from pathlib import Path; from harness.approval.queue import ApprovalQueue; " \
           "ApprovalQueue(Path(sys.argv[1])).close()"
    for round_ in range(8):
        state = tmp_path / f"state-{round_}"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(state)], stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
