"""Getting a Docker client, with one clear error when there is no daemon."""

from __future__ import annotations

import os
import threading

import docker
import docker.errors

from sandbox.errors import DockerUnavailable

# The API version each daemon negotiated, by the variables that name it. docker-py asks the daemon for
# it (GET /version) each time a client is made, and every sandbox makes one: 8-9 ms of each start here.
# A client given the version asks nothing; the ping that follows still proves the daemon answers.
_negotiated: dict[tuple[str, ...], str] = {}
_lock = threading.Lock()
_DAEMON_VARIABLES = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONFIG")


def client_or_default(client: docker.DockerClient | None = None) -> docker.DockerClient:
    """`client`, or one from the environment (DOCKER_HOST or the default socket), checked with a ping.

    Raises:
        DockerUnavailable: no daemon answers.
    """
    if client is not None:
        return client
    daemon = tuple(os.environ.get(name, "") for name in _DAEMON_VARIABLES)
    try:
        with _lock:
            version = _negotiated.get(daemon)
        client = docker.from_env(timeout=120, version=version) if version else docker.from_env(timeout=120)
        client.ping()
    except (docker.errors.DockerException, OSError) as exc:
        with _lock:
            _negotiated.pop(daemon, None)   # another daemon may answer there next time
        raise DockerUnavailable(
            f"cannot reach the Docker daemon ({exc}); start it (e.g. `sudo systemctl start docker`) "
            "or point DOCKER_HOST at one, then run again") from exc
    with _lock:
        _negotiated[daemon] = client.api.api_version
    return client
