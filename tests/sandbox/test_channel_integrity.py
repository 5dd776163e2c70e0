"""The agent cannot forge or disturb the channel's answers, though the channel runs as its user.

Without protection a command could write a made-up answer into the channel server's stdout through
/proc/<server>/fd/1 (a failing test run reported as passing), inject requests through fd 0, or
rewrite the server through /proc/<server>/mem. The server makes itself non-dumpable, which puts
those files out of the agent's reach.
"""

from __future__ import annotations

from sandbox.docker_sandbox import DockerSandbox
from tests.sandbox.conftest import run_python

FORGE = """
import base64, json, os, struct
def cap(s):
    return {"head": base64.b64encode(s).decode(), "tail": "", "total_bytes": len(s), "total_lines": 1,
            "truncated": False, "error_lines": [], "error_lines_total": 0}
answer = {"ok": True, "exit_code": 0, "duration": 0.1, "timed_out": False, "killed_leftovers": 0,
          "stdout": cap(b"FORGED: 100 passed\\n"), "stderr": cap(b"")}
body = json.dumps(answer).encode()
server = int(open("/proc/%d/stat" % os.getppid()).read().rsplit(")", 1)[1].split()[1])
fd = os.open("/proc/%d/fd/1" % server, os.O_WRONLY)
os.write(fd, struct.pack(">I", len(body)) + body)
"""


def test_a_command_cannot_write_a_forged_answer_into_the_channel(sandbox: DockerSandbox) -> None:
    assert sandbox._channel is not None and sandbox._channel.guarded
    sandbox.write_file("/tmp/forge.py", FORGE.encode())
    result = sandbox.exec("python3 /tmp/forge.py; exit 1", timeout=20)
    assert result.exit_code == 1 and "FORGED" not in result.stdout.text
    assert "PermissionError: [Errno 13] Permission denied: '/proc/" in result.stderr.text
    assert sandbox.exec("echo in sync", timeout=10).stdout.text == "in sync\n"


def test_the_channel_servers_proc_files_are_out_of_the_agents_reach(sandbox: DockerSandbox) -> None:
    assert sandbox._channel is not None
    pid = sandbox._channel.server_pid
    got = run_python(sandbox, f"""
        import os
        for name, mode in (("mem", os.O_RDWR), ("fd/0", os.O_WRONLY), ("environ", os.O_RDONLY)):
            try:
                os.close(os.open("/proc/{pid}/" + name, mode))
                print(name, "open")
            except OSError as exc:
                print(name, exc.errno)
        own = os.open("/proc/self/environ", os.O_RDONLY)   # positive control: its own are readable
        print("own", len(os.read(own, 100)) > 0)
    """)
    assert got.stdout.text.split("\n")[:4] == ["mem 13", "fd/0 13", "environ 13", "own True"], got
