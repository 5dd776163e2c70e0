"""The listening socket of the harness's own servers (`harness web`, `harness mcp --http`)."""

from __future__ import annotations

import socket

from harness.errors import ConfigError


def listening_socket(host: str, port: int, example_port: int, backlog: int = 128) -> socket.socket:
    """A TCP socket bound to `host:port` (0: a free port) and already listening, so a client started on
    the line announcing it is never refused (a socket only bound refuses connections until the server's
    loop calls `listen`).

    Raises:
        ConfigError: the address cannot be bound (a port in use, a host not of this machine).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}; pick another with --port "
                          f"(0 takes a free one), e.g. --port {example_port}") from exc
    sock.listen(backlog)
    return sock
