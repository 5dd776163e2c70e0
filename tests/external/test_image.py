"""The agent images: built FROM the sandbox image offline, labelled, and found again by a second call.

These build images (no container of their own); the first build of each agent takes minutes
(resolution, wheels, an offline pip install), later runs find the tag. The figures are printed by
`python -m tests.external.measure`, never asserted.
"""

from __future__ import annotations

import docker
import pytest

from harness.environments import EnvironmentBuildError
from harness.environments.tags import HASH_LABEL, KIND_LABEL
from harness.external import ensure_agent_image, parse_agent
from harness.external.image import AGENT_LABEL
from sandbox.images import BASE_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize("name", ["mini-swe-agent", "aider"])
def test_an_agent_image_builds_on_the_sandbox_image_and_a_second_call_builds_nothing(
        name: str, sandbox_image: str, docker_client: docker.DockerClient) -> None:
    spec = parse_agent(name)
    tag = ensure_agent_image(sandbox_image, spec)
    said: list[str] = []
    assert ensure_agent_image(sandbox_image, spec, progress=said.append) == tag
    assert said == []                                    # no resolution, no download, no build line
    attrs = docker_client.images.get(tag).attrs
    labels = attrs["Config"]["Labels"]
    assert labels[KIND_LABEL] == "agent" and labels[AGENT_LABEL] == spec.install_name
    assert labels[BASE_LABEL] == sandbox_image and tag.endswith(labels[HASH_LABEL])
    assert attrs["Config"]["User"] == "agent" and attrs["Config"]["WorkingDir"] == "/workspace"
    path = next(e for e in attrs["Config"]["Env"] if e.startswith("PATH="))
    assert "/opt/agents" not in path                     # called by absolute path only
    base_layers = docker_client.images.get(sandbox_image).attrs["RootFS"]["Layers"]
    assert attrs["RootFS"]["Layers"][:len(base_layers)] == base_layers      # FROM the sandbox image


def test_both_formats_of_mini_share_one_image(sandbox_image: str) -> None:
    assert ensure_agent_image(sandbox_image, parse_agent("mini-swe-agent-tools")) == \
        ensure_agent_image(sandbox_image, parse_agent("mini-swe-agent"))


def test_a_command_agent_gets_the_testbed_link_and_git_settings_but_no_venv(
        sandbox_image: str, docker_client: docker.DockerClient) -> None:
    tag = ensure_agent_image(sandbox_image, parse_agent("cmd:true"))
    assert tag.startswith("harness-env:agent-none-")
    history = " ".join(str(layer.get("CreatedBy", "")) for layer in docker_client.images.get(tag).history())
    assert "/testbed" in history and "safe.directory" in history and "pip install" not in history


def test_a_missing_base_image_is_refused_with_what_was_expected() -> None:
    with pytest.raises(EnvironmentBuildError, match=r"'harness-sandbox:no-such-tag' does not exist.*sandbox build"):
        ensure_agent_image("harness-sandbox:no-such-tag", parse_agent("aider"))
