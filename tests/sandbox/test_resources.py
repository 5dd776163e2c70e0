"""Fork bombs, memory hogs and disk fills hit the sandbox's limits, and the next command still works.

These run in a sandbox with small limits (set through `Limits`, as an operator would) so that each
probe reaches its limit quickly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.tools.shell.truncation import format_observation
from sandbox.api import Limits
from sandbox.docker_sandbox import DockerSandbox
from tests.sandbox.conftest import make_spec, processes

SMALL = Limits(memory="256m", pids=64, workspace_size="64m", tmp_size="32m", home_size="16m",
               file_size=16 * 1024 * 1024, open_files=256)


@pytest.fixture
def small_box(sandbox_image: str) -> Iterator[DockerSandbox]:
    with DockerSandbox(make_spec(sandbox_image, limits=SMALL)) as box:
        yield box


def _next_command_works(box: DockerSandbox) -> None:
    result = box.exec("echo alive && touch /workspace/after && ls /workspace/after", timeout=20)
    assert result.exit_code == 0 and result.stdout.text == "alive\n/workspace/after\n", result
    assert sorted(p.split()[1] for p in processes(box)) == ["cat", "docker-init", "python3"]


def test_fork_bomb_stops_at_the_pids_limit_and_is_cleaned_up(small_box: DockerSandbox) -> None:
    result = small_box.exec("bomb() { bomb | bomb & }; bomb; sleep 2; echo done", timeout=5)
    text = result.stdout.text + result.stderr.text
    assert "Resource temporarily unavailable" in text       # fork() failed with EAGAIN at the pids limit
    _next_command_works(small_box)


def test_memory_hog_is_killed_by_the_memory_limit(small_box: DockerSandbox) -> None:
    result = small_box.exec("python3 -c 'x = bytearray(1024**3); x[::4096] = b\"1\" * (1024**3 // 4096)'",
                            timeout=60)
    assert result.exit_code == 128 + 9 or "MemoryError" in result.stderr.text, result
    _next_command_works(small_box)


def test_memory_limit_allows_what_fits(small_box: DockerSandbox) -> None:
    result = small_box.exec("python3 -c 'x = bytearray(64 * 1024**2); x[::4096] = b\"1\" * (64 * 256); print(\"ok\")'",
                            timeout=60)
    assert result.exit_code == 0 and result.stdout.text == "ok\n"


def test_one_huge_file_hits_the_file_size_limit(small_box: DockerSandbox) -> None:
    result = small_box.exec("head -c 100M /dev/zero > /workspace/big", timeout=60)
    assert result.exit_code == 128 + 25                       # SIGXFSZ: RLIMIT_FSIZE is 16 MiB here
    size = small_box.exec("stat -c %s /workspace/big", timeout=10).stdout.text.strip()
    assert size == str(16 * 1024 * 1024)
    _next_command_works(small_box)


def test_filling_the_workspace_stops_with_no_space_left(small_box: DockerSandbox) -> None:
    result = small_box.exec("for i in 1 2 3 4 5 6; do head -c 15M /dev/zero > /workspace/f$i || exit; done",
                            timeout=60)
    assert result.exit_code == 1 and "No space left on device" in result.stderr.text, result
    small_box.exec("rm -f /workspace/f*", timeout=10)
    _next_command_works(small_box)


def test_filling_tmp_does_not_stop_the_channel_saving_output(small_box: DockerSandbox) -> None:
    fill = small_box.exec("for i in 1 2 3; do head -c 15M /dev/zero > /tmp/fill$i || break; done", timeout=60)
    assert "No space left on device" in fill.stderr.text
    small_box.exec("rm /tmp/fill3", timeout=10)               # leaves about 2 MiB free
    flood = small_box.exec("seq 1 2000000", timeout=60)
    assert flood.exit_code == 0 and flood.stdout.total_lines == 2000000
    assert flood.stdout.tail.endswith("2000000\n")
    assert 0 < flood.stdout.saved_bytes < 4 * 1024 ** 2     # what fitted in /tmp was saved
    assert "of it is saved at /tmp/harness/output/" in format_observation(flood)
    _next_command_works(small_box)


def test_too_many_open_files_fails_with_emfile(small_box: DockerSandbox) -> None:
    result = small_box.exec("python3 -c '\nimport errno\nfs = []\ntry:\n"
                            "    while True: fs.append(open(\"/dev/null\"))\n"
                            "except OSError as e: print(errno.errorcode[e.errno], len(fs) < 256)'", timeout=30)
    assert result.stdout.text == "EMFILE True\n", result


def test_under_memory_pressure_commands_are_killed_before_the_channel(small_box: DockerSandbox) -> None:
    scores = small_box.exec("cat /proc/$$/oom_score_adj /proc/$PPID/oom_score_adj", timeout=10)
    assert scores.stdout.text.split() == ["500", "0"]         # the command is preferred, the channel kept
    many = ("for i in $(seq 24); do python3 -c 'import time; x = bytearray(12 * 2**20); x[::4096] = b\"1\" * "
            "(3 * 2**10); time.sleep(3)' & done; wait; echo waited")
    result = small_box.exec(many, timeout=60)
    assert result.stdout.text == "waited\n"                   # the channel answered: it was not the victim
    _next_command_works(small_box)
