"""The one-machine Ray of `harness eval --backend ray` (no --ray-address) is closed to everyone else:
every listening socket of its processes is on loopback, and it runs with token authentication, its
token in a 0600 file in a 0700 folder, so a driver with another token is refused."""

from __future__ import annotations

import ipaddress
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from harness.evaluation.ray_backend import connection, import_ray
from harness.evaluation.ray_cluster import _tree

REPO = Path(__file__).resolve().parents[2]
WRONG_TOKEN = "0" * 64
JOIN = ("import sys, ray; from harness.evaluation.ray_cluster import keep_loopback\n"
        "with keep_loopback():\n"
        "    ray.init(address=sys.argv[1], log_to_driver=False)\n"
        "print('joined', len(ray.nodes()))\n")


def _ip(hexaddr: str) -> str:
    raw = bytes.fromhex(hexaddr)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    return str(ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))))


def listening_sockets(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """(pid, command, address, port) of every listening TCP socket the processes `pids` hold,
    from /proc/net/tcp{,6} and /proc/PID/fd (what `ss -ltnp` shows)."""
    listeners: dict[int, tuple[str, int]] = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":                                   # TCP_LISTEN
                host, port = fields[1].split(":")
                listeners[int(fields[9])] = (_ip(host), int(port, 16))
    found = []
    for pid in sorted(pids):
        try:
            command = Path(f"/proc/{pid}/comm").read_text().strip()
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue                                                # gone meanwhile
        for link in links:
            if link.startswith("socket:[") and int(link[8:-1]) in listeners:
                found.append((pid, command, *listeners[int(link[8:-1])]))
    return found


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _join(address: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return subprocess.run([sys.executable, "-c", JOIN, address], cwd=REPO, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


def test_one_machine_cluster_listens_on_loopback_only_and_refuses_a_driver_without_its_token() -> None:
    ray = import_ray()
    before = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")}
    with connection(ray, None):
        assert ray.get([ray.remote(lambda: os.getpid()).remote() for _ in range(2)])   # workers start too
        time.sleep(1.0)
        sockets = listening_sockets(_tree(os.getpid()))
        address = ray.get_runtime_context().gcs_address
        token = Path(os.environ["RAY_AUTH_TOKEN_PATH"])
        token_mode, folder_mode = stat.S_IMODE(token.stat().st_mode), stat.S_IMODE(token.parent.stat().st_mode)
        right = _join(address, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
        wrong = _join(address, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=WRONG_TOKEN)
        none = _join(address, RAY_AUTH_MODE="disabled")
        mode = os.environ["RAY_AUTH_MODE"]

    commands = {command for _, command, _, _ in sockets}
    assert {"gcs_server", "raylet"} <= commands, sockets                 # the listing sees Ray's servers
    assert [s for s in sockets if not _is_loopback(s[2])] == [], sockets
    assert address.startswith("127.0.0.1:")
    assert (mode, token_mode, folder_mode) == ("token", 0o600, 0o700)
    assert right.returncode == 0 and "joined 1" in right.stdout, right.stderr[-2000:]   # positive control
    for refused in (wrong, none):
        assert refused.returncode != 0 and ("authentication" in refused.stderr.lower()
                                            or "unauthenticated" in refused.stderr.lower()), refused.stderr[-2000:]
    assert not token.exists()                                            # removed with the cluster
    assert {k: os.environ.get(k) for k in before} == before              # this process is as it was
