"""The channel server's read loop (`sandbox/server/loop.py`), driven directly on the host (it is pure
Python): a command printing a lot is left a moment to fill its pipe between reads (large reads, not one
per write), while a small output is read at once and nothing is lost either way."""

from __future__ import annotations

import os
import subprocess
import time
import types

import pytest

from sandbox.server import loop, processes
from sandbox.server.capture import Capture
from sandbox.server.processes import Sweep


def _run(command: str, monkeypatch: pytest.MonkeyPatch, grow: bool = True) -> tuple[Capture, list[int]]:
    """`command` through `_pump`; returns its stdout capture and the bytes read before each nap."""
    naps: list[int] = []
    caps = [Capture(4096, 4096, None, 0, None, 0) for _ in range(2)]

    def sleep(seconds: float) -> None:
        naps.append(caps[0].total)
        time.sleep(seconds)

    monkeypatch.setattr(loop, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep))
    if not grow:
        def refuse(*args: object) -> int:
            raise OSError("over the pipe quota")
        monkeypatch.setattr(loop, "fcntl", types.SimpleNamespace(fcntl=refuse))
    proc = subprocess.Popen(["bash", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    assert not loop._pump(proc, caps, 60.0, 1.0, Sweep())
    assert proc.wait() == 0
    return caps[0], naps


FLOOD = "yes 'a line of output' | head -c 64M"


def test_a_small_output_is_read_without_a_nap(monkeypatch: pytest.MonkeyPatch) -> None:
    out, naps = _run("for i in $(seq 1000); do echo line $i; done", monkeypatch)
    assert out.lines == 1000 and naps == []


def test_a_flood_naps_only_after_the_first_megabyte_and_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # the last line comes after a pause: at least that read is short, whatever the machine's load
    out, naps = _run(f"{FLOOD}; sleep 0.05; echo; echo end", monkeypatch)
    assert out.total == (64 << 20) + 5 and out.lines == (64 << 20) // len("a line of output\n") + 2
    assert naps and min(naps) > loop.HOT
    line = b"a line of output\n"
    assert bytes(out.tail).endswith((line * 2)[:(64 << 20) % len(line) + len(line)] + b"\nend\n")


def test_without_a_grown_pipe_the_loop_never_naps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A nap with the default 64 KiB pipe would stall the command: it fills that in microseconds."""
    out, naps = _run(FLOOD, monkeypatch, grow=False)
    assert out.total == 64 << 20 and naps == []


def test_where_there_is_no_static_bash_commands_run_under_bin_bash() -> None:
    assert processes.bash_executable() == "/bin/bash"   # the host has no /opt/harness/bin/bash
    proc = processes.spawn("echo $BASH; readlink /proc/$$/exe; true", {"PATH": "/usr/bin:/bin"}, "/")
    out, _ = proc.communicate(timeout=30)
    assert out.decode().split("\n")[:2] == ["/bin/bash", os.path.realpath("/bin/bash")]
