"""The command line stops cleanly: SIGTERM removes the sandbox first; a closed pipe is not a crash."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = str(REPO / ".venv" / "bin" / "harness")


def _sandboxes_of(docker_client, pid: int) -> list[str]:
    # the low-level list never inspects, so a container removed between listing and reading cannot fail it
    found = docker_client.api.containers(all=True, filters={"label": f"harness.pid={pid}"})
    return [(c.get("Names") or [c["Id"]])[0].lstrip("/") for c in found]


def test_sigterm_during_a_command_removes_the_sandbox_and_exits_130(docker_client, sandbox_image: str) -> None:
    proc = subprocess.Popen([HARNESS, "exec", "--", "sleep 60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)
    deadline = time.monotonic() + 60
    while not _sandboxes_of(docker_client, proc.pid):   # positive control: the sandbox exists while it runs
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _sandboxes_of(docker_client, proc.pid) == []


def test_a_closed_output_pipe_ends_quietly_with_141() -> None:
    # The reader is gone before the harness writes a byte (its read end is closed before the start),
    # so the first write fails whatever the pipe's buffer size: the outcome does not depend on timing.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([HARNESS, "tools"], stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=REPO)
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    piped = subprocess.run([HARNESS, "tools"], capture_output=True, text=True, cwd=REPO)
    assert piped.returncode == 0   # positive control: a reader that reads everything
    assert piped.stdout.startswith("bash(command")
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
