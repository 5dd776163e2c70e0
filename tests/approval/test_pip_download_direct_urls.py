"""pip_download runs no package code on the host: an approved download of a wheel whose dependency is a
URL to an sdist (whose build backend would write a marker file) is refused before that URL is fetched,
and nothing is installed; a wheel with an index dependency installs both offline in the sandbox."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from harness.approval.gate import ApprovalGate
from harness.approval.policy import load_policy
from harness.approval.queue import ApprovalQueue
from harness.config import Config
from harness.errors import ToolArgumentsError, ToolError
from harness.tools.base import ToolContext
from harness.tools.outbound.registry import outbound_tools
from tests.approval.helpers import CountingServer
from tests.evaluation.hostile_index import publish, publish_evil

pytestmark = pytest.mark.docker


def _pip_download(state: Path, box: Any, index_url: str) -> Any:
    """The pip_download tool of a session whose policy approves every call."""
    state.mkdir(parents=True)
    (state / "policy.toml").write_text('[[rules]]\nname = "test-all"\ntool = "*"\ndecision = "approve"\n')
    config = Config()
    config = config.replace(approval=dataclasses.replace(config.approval, state_dir=state, pip_index_url=index_url))
    gate = ApprovalGate(ApprovalQueue(state), load_policy(state / "policy.toml"), mode="deny", timeout=60,
                        poll_interval=0.05)
    ctx = ToolContext(sandbox=box, session=box.session, tool_use_id="toolu_1", approver=gate)
    tool = next(t for t in outbound_tools(config) if t.name == "pip_download")
    return lambda requirement, key: tool.function(ctx, requirement=requirement, key=key)


def test_pip_download_refuses_a_dependency_url_and_never_builds_on_the_host(tmp_path: Path, sandbox: Any) -> None:
    marker = tmp_path / "marker"
    with CountingServer() as index:
        evil = publish_evil(index, marker)
        good = publish(index, "good", "1.0", [f"evil @ {evil}"])
        publish(index, "dep", "1.0", [])
        publish(index, "fine", "1.0", ["dep==1.0"])
        pip_download = _pip_download(tmp_path / "state", sandbox, index.url("/simple"))
        with pytest.raises(ToolError) as refused:
            pip_download("good==1.0", "pip-good")
        assert f"good-1.0-py3-none-any.whl requires 'evil @ {evil}', a direct reference" in str(refused.value)
        assert "nothing was installed" in str(refused.value)
        assert index.count(good) == 1 and index.count("/evil-1.0.tar.gz") == 0
        assert not marker.exists()
        assert "No module named 'good'" in sandbox.exec("python -c 'import good'").stderr.text
        with pytest.raises(ToolArgumentsError, match="is a direct reference"):
            pip_download(f"evil @ {evil}", "pip-evil")
        assert index.count("/evil-1.0.tar.gz") == 0 and not marker.exists()
        out = pip_download("fine==1.0", "pip-fine")          # positive control: dependencies still come along
        assert "downloaded 2 wheel(s)" in out and "exit code 0" in out, out
        assert sandbox.exec("python -c 'import fine, dep; print(dep.VERSION)'").stdout.text.strip() == "1.0"
