"""No traffic leaves the sandbox: it has only a loopback interface (network_mode "none").

Every probe runs inside the container and reports the errno it got; nothing is sent from the host.
The positive control is a TCP/UDP round trip over the sandbox's own loopback, which must work.
"""

from __future__ import annotations

import errno
import socket

from harness.tools.shell.truncation import ERROR_PATTERN, format_observation
from sandbox.docker_sandbox import DockerSandbox
from tests.sandbox.conftest import probe_json

CONNECT = """
import errno, json, socket, sys
family, kind, host, port = {args!r}
s = socket.socket(getattr(socket, family), getattr(socket, kind))
s.settimeout(5)
try:
    if kind == "SOCK_DGRAM":
        s.sendto(b"x", (host, port))
    else:
        s.connect((host, port))
    print(json.dumps({{"errno": 0}}))
except OSError as exc:
    print(json.dumps({{"errno": exc.errno, "message": str(exc)}}))
"""


def _attempt(box: DockerSandbox, family: str, kind: str, host: str, port: int) -> dict:
    return probe_json(box, CONNECT.format(args=(family, kind, host, port)))


def test_outbound_tcp_fails_with_network_unreachable(shared_box: DockerSandbox) -> None:
    got = _attempt(shared_box, "AF_INET", "SOCK_STREAM", "1.1.1.1", 443)
    assert got["errno"] == errno.ENETUNREACH, got


def test_outbound_udp_fails_with_network_unreachable(shared_box: DockerSandbox) -> None:
    got = _attempt(shared_box, "AF_INET", "SOCK_DGRAM", "8.8.8.8", 53)
    assert got["errno"] == errno.ENETUNREACH, got


def test_outbound_ipv6_fails_with_network_unreachable(shared_box: DockerSandbox) -> None:
    got = _attempt(shared_box, "AF_INET6", "SOCK_STREAM", "2606:4700:4700::1111", 443)
    assert got["errno"] in (errno.ENETUNREACH, errno.EADDRNOTAVAIL), got


def test_docker_host_and_its_gateway_are_unreachable(shared_box: DockerSandbox) -> None:
    for host in ("172.17.0.1", "172.17.0.2", "10.0.2.2", "192.168.65.1"):
        got = _attempt(shared_box, "AF_INET", "SOCK_STREAM", host, 2375)
        assert got["errno"] == errno.ENETUNREACH, (host, got)


def test_only_the_loopback_interface_exists_and_no_route_is_set(shared_box: DockerSandbox) -> None:
    got = probe_json(shared_box, """
        import json, os
        routes = open("/proc/net/route").read().splitlines()[1:]
        print(json.dumps({"ifaces": sorted(os.listdir("/sys/class/net")), "routes": routes}))
    """)
    assert got == {"ifaces": ["lo"], "routes": []}


def test_the_hosts_resolver_and_search_domains_are_not_inside(shared_box: DockerSandbox) -> None:
    resolv = shared_box.exec("cat /etc/resolv.conf", timeout=10).stdout.text
    assert resolv.strip() == "nameserver 127.0.0.1", resolv


def test_dns_lookup_fails_to_resolve(shared_box: DockerSandbox) -> None:
    got = probe_json(shared_box, """
        import json, socket
        try:
            socket.getaddrinfo("pypi.org", 443)
            print(json.dumps({"code": 0}))
        except socket.gaierror as exc:
            print(json.dumps({"code": exc.errno, "message": str(exc)}))
    """)
    assert got["code"] in (socket.EAI_AGAIN, socket.EAI_NONAME), got


def test_icmp_needs_privileges_the_sandbox_does_not_have(shared_box: DockerSandbox) -> None:
    got = probe_json(shared_box, """
        import json, socket
        out = {}
        for name, kind in (("raw", socket.SOCK_RAW), ("ping", socket.SOCK_DGRAM)):
            try:
                s = socket.socket(socket.AF_INET, kind, socket.IPPROTO_ICMP)
                s.sendto(b"\\x08\\x00\\xf7\\xff\\x00\\x00\\x00\\x00", ("1.1.1.1", 0))
                out[name] = 0
            except OSError as exc:
                out[name] = exc.errno
        print(json.dumps(out))
    """)
    # Raw sockets need CAP_NET_RAW (dropped); unprivileged ping sockets are off or have no route.
    assert got["raw"] == errno.EPERM, got
    assert got["ping"] in (errno.EACCES, errno.ENETUNREACH), got


def test_loopback_inside_the_sandbox_works(shared_box: DockerSandbox) -> None:
    got = probe_json(shared_box, """
        import json, socket, threading
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        def answer():
            conn, _ = server.accept()
            conn.sendall(conn.recv(100).upper())
            conn.close()
        threading.Thread(target=answer).start()
        client = socket.create_connection(server.getsockname(), timeout=5)
        client.sendall(b"ping")
        tcp = client.recv(100).decode()
        udp_in = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp_in.bind(("127.0.0.1", 0))
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"dgram", udp_in.getsockname())
        print(json.dumps({"tcp": tcp, "udp": udp_in.recv(100).decode()}))
    """)
    assert got == {"tcp": "PING", "udp": "dgram"}


def test_network_failure_in_the_shell_tool_carries_the_no_network_hint(shared_box: DockerSandbox) -> None:
    result = shared_box.exec("python3 -c 'import urllib.request; urllib.request.urlopen(\"http://1.1.1.1\")'",
                             timeout=20, error_pattern=ERROR_PATTERN)
    text = format_observation(result)
    assert result.exit_code == 1
    assert "Network is unreachable" in text
    assert "hint: the sandbox has no network" in text
    control = format_observation(shared_box.exec("echo fine", timeout=10))
    assert "hint" not in control
