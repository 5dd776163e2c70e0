"""Where runs and evaluations were written on this machine: `harness run`, `harness demo` and `harness
eval` append their output folder to STATE_DIR/outputs.txt, so the web console finds a run written
anywhere (`--out /tmp/try-3`), not only below ./runs.

One absolute path per line, appended (O_APPEND, a link there refused); reading keeps the last
`KEEP` distinct entries that are still folders reached through no link in any component
(`checks.dir_beneath` from `/`: the line is written resolved, so a link on its way came later).
Nothing else is stored: the folders themselves say what they hold.

`write_session_result` writes a run's result.json, the `SessionResult` record (harness.core.records)
the web console and `harness run --json` read back.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness import checks
from harness.core.records import SessionResult
from harness.errors import UnsafePathError
from sandbox.text import safe_json

FILE = "outputs.txt"
KEEP = 2000


def write_session_result(path: Path, result: SessionResult) -> None:
    """Write `result` as the run's result.json (0600, never through a link), with its schema version."""
    checks.write_file(path, safe_json(result.to_dict(), indent=2) + "\n")


def record_output(state_dir: Path, folder: Path) -> None:
    """Note `folder` (a run's or an evaluation's output folder) in the state folder's list; a failure to
    write the note never stops the run."""
    line = str(Path(folder).expanduser().resolve())
    if "\n" in line or "\r" in line:
        return
    try:
        checks.private_dir(state_dir)
        with os.fdopen(checks.open_file(Path(state_dir) / FILE, append=True), "a", encoding="utf-8",
                       errors="surrogateescape") as out:
            out.write(line + "\n")
    except (OSError, UnsafePathError):
        pass


def recorded_outputs(state_dir: Path) -> list[Path]:
    """The recorded folders that still exist (not links), newest last, each once."""
    try:
        fd = checks.open_beneath(state_dir, FILE, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, UnsafePathError):
        return []
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - 4_000_000))
        lines = f.read().decode("utf-8", "surrogateescape").splitlines()
    seen: dict[str, None] = {}
    for line in reversed(lines):
        if line.startswith("/") and line not in seen:
            seen[line] = None
            if len(seen) >= KEEP:
                break
    return [Path(p) for p in reversed(seen) if _real_folder(p)]


def _real_folder(path: str) -> bool:
    """Whether the recorded `path` is a folder reached through no link in any component (a recorded
    folder whose parent was replaced by a link is not listed)."""
    try:
        os.close(checks.dir_beneath("/", path.lstrip("/")))
    except (OSError, UnsafePathError):
        return False
    return True
