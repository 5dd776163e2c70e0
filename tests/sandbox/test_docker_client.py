"""The Docker client every sandbox makes: the daemon's API version is asked once per daemon, not per sandbox,
and a daemon that does not answer still gets the one clear error."""

from __future__ import annotations

from pathlib import Path

import docker
import docker.api.client
import pytest

from sandbox import docker_client as client_module
from sandbox.docker_client import client_or_default
from sandbox.errors import DockerUnavailable

pytestmark = pytest.mark.docker


def _count_version_requests(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    asked: list[int] = []
    real = docker.api.client.APIClient._retrieve_server_version

    def counting(self: docker.api.client.APIClient) -> str:
        asked.append(1)
        return real(self)

    monkeypatch.setattr(docker.api.client.APIClient, "_retrieve_server_version", counting)
    return asked


def test_the_api_version_is_asked_of_a_daemon_once(monkeypatch: pytest.MonkeyPatch,
                                                   docker_client: docker.DockerClient) -> None:
    monkeypatch.setattr(client_module, "_negotiated", {})
    asked = _count_version_requests(monkeypatch)
    first = client_or_default()
    assert len(asked) == 1                         # positive control: a first client asks
    second = client_or_default()
    assert len(asked) == 1                         # the next one is told
    assert second.api.api_version == first.api.api_version == docker_client.api.api_version
    assert second.version()["ApiVersion"]          # and speaks to the daemon


def test_a_daemon_that_does_not_answer_is_a_clear_error_and_is_not_remembered(
        monkeypatch: pytest.MonkeyPatch, docker_client: docker.DockerClient, tmp_path: Path) -> None:
    monkeypatch.setattr(client_module, "_negotiated", {})
    client_or_default()
    remembered = dict(client_module._negotiated)
    assert remembered
    dead = f"unix://{tmp_path}/no-daemon.sock"
    monkeypatch.setenv("DOCKER_HOST", dead)
    for _ in range(2):   # the second time too: a version remembered for the default socket is not used here
        with pytest.raises(DockerUnavailable, match="cannot reach the Docker daemon"):
            client_or_default()
    assert client_module._negotiated == remembered
