"""The container's life on its own: a deployment starts a container, knows whether it runs, removes it."""

from __future__ import annotations

import docker
import pytest

from sandbox.deployment.docker import DockerDeployment
from sandbox.errors import SandboxError
from tests.sandbox.conftest import make_spec

pytestmark = pytest.mark.docker


def test_a_deployment_is_alive_from_start_to_stop_and_leaves_nothing(sandbox_image: str,
                                                                   docker_client: docker.DockerClient) -> None:
    deployment = DockerDeployment(make_spec(sandbox_image))
    assert not deployment.alive()
    deployment.start()
    try:
        name = deployment.container.name
        assert deployment.alive()
        with pytest.raises(SandboxError, match="already started"):
            deployment.start()
        deployment.container.kill()
        assert not deployment.alive()   # stopped from outside: the daemon says so
    finally:
        deployment.stop()
    deployment.stop()                   # idempotent
    assert not deployment.alive()
    assert docker_client.containers.list(all=True, filters={"name": name}) == []
    with pytest.raises(SandboxError, match="closed"):
        deployment.open_channel({})
