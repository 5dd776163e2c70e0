"""The one assembly (`harness.agent.assembly`): the workspace a session gets, in one call, in a real sandbox."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import docker
import pytest

from harness.agent.assembly import open_task_workspace, session_catalog
from harness.config import Config
from harness.core.task import load_task
from harness.messages import ToolUse
from harness.tools.base import ToolContext

REPO_ROOT = Path(__file__).resolve().parents[2]
TEST_LABELS = {"harness.test": "1"}

pytestmark = pytest.mark.docker


def _containers(session: str) -> list[Any]:
    return docker.from_env().containers.list(all=True, filters={"label": [f"harness.session={session}"]})


class Refuse:
    """An approver that refuses every call (none is made here)."""

    def run(self, action: Any, arguments: dict[str, Any], ctx: ToolContext) -> str:
        raise AssertionError(f"no outbound call was expected, got {action.name}")


def test_open_task_workspace_gives_the_session_s_sandbox_repository_catalog_and_patch(sandbox_image: str) -> None:
    cfg = Config()
    config = cfg.replace(sandbox=dataclasses.replace(cfg.sandbox, image=sandbox_image))
    task = load_task(REPO_ROOT / "tasks" / "wordcount")
    approver = Refuse()
    with open_task_workspace(task, config, approver, labels=TEST_LABELS) as workspace:
        assert set(workspace.catalog.tools) == set(session_catalog(config).tools)
        assert workspace.context.approver is approver and workspace.context.session == workspace.session
        [container] = _containers(workspace.session)
        assert container.labels["harness.kind"] == "session" and container.labels["harness.test"] == "1"
        log = workspace.execute(ToolUse("t1", "bash", {"command": "git log --format=%s && git status --porcelain"}))
        assert not log.is_error and log.content.splitlines()[1:] == ["starting state"], log.content
        edited = workspace.execute(ToolUse("t2", "bash", {"command": "echo '# note' >> wordcount/core.py"}))
        assert not edited.is_error, edited.content
        patch = workspace.patch()
        assert "diff --git a/wordcount/core.py b/wordcount/core.py" in patch and "+# note" in patch
    assert _containers(workspace.session) == []        # closing the workspace removed its sandbox
