"""What a session does to the sandbox's workspace besides the agent's own calls.

A git baseline of the starting files in GIT_DIR=/tmp/harness/git (outside /workspace, where the
agent's own repository is: /workspace/.git, one commit of the starting state), the patch against the
baseline, the task's test command, and the replay of recorded calls that rebuilds a workspace when a
run is resumed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.config import Config
from harness.core.sources import GIT_IDENTITY
from harness.core.task import Task
from harness.errors import HarnessError
from harness.messages import Message
from harness.tools.base import Effect, ToolContext
from harness.tools.catalog import Catalog
from sandbox.api import WORKDIR, ExecResult, Sandbox

GIT_DIR = "/tmp/harness/git"
PATCH_FILE = "/tmp/harness/patch.diff"
EXCLUDE = ["__pycache__/", "*.pyc", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/", "*.egg-info/"]
GIT_ENV = {"GIT_DIR": GIT_DIR, "GIT_WORK_TREE": WORKDIR, **GIT_IDENTITY, "GIT_CONFIG_NOSYSTEM": "1",
           "HOME": "/tmp/harness"}


def _git(box: Sandbox, script: str, what: str, timeout: float = 300.0, env: dict[str, str] = GIT_ENV) -> ExecResult:
    result = box.exec(script, timeout=timeout, env=env, save_output=False)
    if not result.ok:
        raise HarnessError(f"{what} failed in the sandbox (exit {result.exit_code}): "
                           f"{(result.stderr.text or result.stdout.text)[-800:]}")
    return result


def start_baseline(box: Sandbox) -> None:
    """Record the starting files, so that the patch can be computed at the end; then make /workspace
    the agent's own git repository whose one commit is the starting state (`git status`, `git diff`,
    `git stash` work as a model expects; no history, no remote). The patch never comes from the
    agent's repository: the agent may commit, amend or reset there as it likes."""
    exclude = "\\n".join(EXCLUDE)
    _git(box, f"git init -q && printf '{exclude}\\n' > {GIT_DIR}/info/exclude && git add -A && "
              "git -c commit.gpgsign=false commit -q --allow-empty -m baseline", "recording the starting files")
    agent = (f"cd {WORKDIR} && git init -q -b main && printf '{exclude}\\n' >> .git/info/exclude && "
             "git config user.name agent && git config user.email agent@sandbox && "
             "git config commit.gpgsign false && git add -A && git commit -q --allow-empty -m 'starting state'")
    _git(box, agent, "making /workspace a git repository",
         env={**GIT_IDENTITY, "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/tmp/harness"})


def sandbox_patch(box: Sandbox) -> str:
    """The agent's change as a unified diff (a/<path> b/<path>) against the starting files."""
    _git(box, f"git add -A && git diff --cached --binary --no-color --no-ext-diff HEAD > {PATCH_FILE}",
         "computing the patch")
    return box.read_file(PATCH_FILE).data.decode("utf-8", errors="replace")


def run_task_tests(box: Sandbox, task: Task, config: Config) -> ExecResult:
    """The task's test command in the workspace; a failing or timed-out run is a result, not an error."""
    assert task.test_cmd
    return box.exec(task.test_cmd, timeout=config.loop.test_timeout)


def replay(messages: Sequence[Message], catalog: Catalog, ctx: ToolContext) -> int:
    """Run the recorded calls again, in order, to rebuild the workspace; outbound calls are not
    repeated (they ran once, with a human's approval). Returns how many calls were replayed."""
    answered = {r.tool_use_id for m in messages for r in m.tool_results}
    count = 0
    for m in messages:
        for call in m.tool_uses:
            if call.id not in answered or call.name not in catalog.tools:
                continue
            if catalog.effect_of(call.name) == Effect.OUTBOUND:
                continue
            catalog.execute(call, dataclasses.replace(ctx, tool_use_id=call.id))
            count += 1
    return count

