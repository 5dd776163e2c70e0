"""Getting a Docker client, with one clear error when there is no daemon."""

from __future__ import annotations

import docker
import docker.errors

from sandbox.errors import DockerUnavailable


def client_or_default(client: docker.DockerClient | None = None) -> docker.DockerClient:
    """`client`, or one from the environment (DOCKER_HOST or the default socket), checked with a ping.

    Raises:
        DockerUnavailable: no daemon answers.
    """
    if client is not None:
        return client
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except (docker.errors.DockerException, OSError) as exc:
        raise DockerUnavailable(
            f"cannot reach the Docker daemon ({exc}); start it (e.g. `sudo systemctl start docker`) "
            "or point DOCKER_HOST at one, then run again") from exc
    return client
