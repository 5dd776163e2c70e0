"""A container's lifeline: its life tied to the process that owns it, by a link the kernel ends.

A container the harness starts runs, as its main process (under Docker's init), `cat` reading the
container's stdin, which the daemon keeps open (`OpenStdin`) for one attached client (`StdinOnce`):
the owner, which attaches to it between the create and the start and keeps that socket open for the
sandbox's life. Nothing is ever written to it. When the owner goes, however it goes (an exception,
SIGTERM, SIGKILL, an OOM kill of the harness), the kernel closes its socket; the daemon sees its
attach end and closes the container's stdin; `cat` reads EOF and exits; the container stops, and
the daemon removes it (`AutoRemove`). No reaper has to run. A process that is merely slow or stopped
(SIGSTOP, a suspended terminal) keeps its file descriptors, so its sandboxes live on.

The socket is opened without inheritance (Python's default, close-on-exec): a program the harness
runs (git, docker, a test) does not hold the lifeline of its sandboxes.

One window is left: a create that the daemon completes after the owner died, before it attached,
leaves a container in the `created` state (never started: no process, no memory). The reaper removes
those (`sandbox.reaper`), as it removes any container whose owner is gone.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import docker
import docker.errors

IDLE_COMMAND = ["cat"]   # the container's main process: reads the lifeline (its stdin) until EOF, then exits
UNTIED_COMMAND = ["sleep", "infinity"]   # the main process of a container started without a lifeline


def tied_options() -> dict[str, Any]:
    """The `containers.create` keyword arguments that tie a container to its lifeline: stdin kept open for
    one attached client (docker-py sets StdinOnce with `stdin_open` when `detach` is false), removed by
    the daemon once it stops."""
    return {"stdin_open": True, "detach": False, "auto_remove": True}


class Lifeline:
    """The owner's end of a container's attached stdin. `close()` cuts it (the container then stops)."""

    def __init__(self, client: docker.DockerClient, container_id: str) -> None:
        """Attach to the container's stdin (created or running).

        Raises:
            docker.errors.APIError: the daemon refused the attach.
        """
        self.container_id = container_id
        self._wrapped: Any = client.api.attach_socket(container_id, params={"stdin": 1, "stream": 1})
        # docker-py hands back a SocketIO over a unix socket, the socket itself over TLS
        self._sock: socket.socket = getattr(self._wrapped, "_sock", self._wrapped)

    def fileno(self) -> int:
        """The socket's descriptor, -1 once closed."""
        return self._sock.fileno()

    def close(self) -> None:
        """Cut the lifeline: the daemon closes the container's stdin and the container stops. Idempotent."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(OSError):
            self._wrapped.close()


def start_tied(client: docker.DockerClient, image: str, **options: Any) -> tuple[Any, Lifeline]:
    """Create a container of `image` whose main process is IDLE_COMMAND, attach its lifeline, start it.

    `options`: `containers.create` keyword arguments (not `command`, `stdin_open`, `detach` or
    `auto_remove`, which the lifeline sets). The attach comes before the start, so a started container
    always has its lifeline.

    Raises:
        docker.errors.APIError: Docker refused the create, the attach or the start (nothing is left).
    """
    container = client.containers.create(image, IDLE_COMMAND, **tied_options(), **options)
    try:
        lifeline = Lifeline(client, str(container.id))
    except BaseException:
        _remove_quietly(container)
        raise
    try:
        container.start()
    except BaseException:
        lifeline.close()
        _remove_quietly(container)
        raise
    return container, lifeline


def _remove_quietly(container: Any) -> None:
    try:
        container.remove(force=True, v=True)
    except docker.errors.APIError:
        pass   # gone already, or being removed (409): the reaper takes what is left
