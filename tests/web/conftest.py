"""Fixtures of the web console's tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def console(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """`harness web --port 0` in its own process, in a folder of its own (./runs there is a default
    root), with one more root given by --runs; yields the URL it prints and the folders."""
    runs, extra, state = tmp_path / "runs", tmp_path / "elsewhere", tmp_path / "state"
    runs.mkdir()
    extra.mkdir()
    env = {**os.environ, "HARNESS_STATE_DIR": str(state), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli.main", "web", "--port", "0", "--runs", str(extra)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        match = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", line)
        assert match, f"harness web printed {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
        yield {"url": match.group(0), "base": match.group(0).split("/?")[0], "runs": runs, "extra": extra,
               "state": state, "env": env, "cwd": tmp_path}
    finally:
        proc.terminate()
        proc.wait(10)
