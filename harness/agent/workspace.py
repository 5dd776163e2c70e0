"""What a session does to the sandbox's workspace besides the agent's own calls.

A git baseline of the starting files in GIT_DIR=/tmp/harness/git (outside /workspace, where the
agent's own repository is: /workspace/.git, one commit of the starting state), the patch against the
baseline, the task's test command, and the replay of recorded calls that rebuilds a workspace when a
run is resumed.
"""

from __future__ import annotations

import dataclasses
import re
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
           "HOME": "/tmp/harness", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_NO_REPLACE_OBJECTS": "1",
           "GIT_GRAFT_FILE": "/dev/null"}


def _git(box: Sandbox, script: str, what: str, timeout: float = 300.0, env: dict[str, str] = GIT_ENV) -> ExecResult:
    result = box.exec(script, timeout=timeout, env=env, save_output=False)
    if not result.ok:
        raise HarnessError(f"{what} failed in the sandbox (exit {result.exit_code}): "
                           f"{(result.stderr.text or result.stdout.text)[-800:]}")
    return result


@dataclasses.dataclass(frozen=True)
class Baseline:
    """What the host keeps of the starting files: the id of their git tree and the baseline's index
    (every file's blob id and stat data), which `sandbox_patch` puts back before the diff."""

    tree: str
    index: bytes


def start_baseline(box: Sandbox) -> Baseline:
    """Record the starting files, so that the patch can be computed at the end; returns what the host
    keeps of them (`sandbox_patch` checks the baseline against it). Then make /workspace the agent's own
    git repository whose one commit is the starting state (`git status`, `git diff`, `git stash` work as
    a model expects; no history, no remote). The agent's repository starts from copies of the
    baseline's objects and index, so the files are hashed once. The patch never comes from the agent's
    repository: the agent may commit, amend or reset there as it likes."""
    exclude = "\\n".join(EXCLUDE)
    made = _git(box, f"git init -q && printf '{exclude}\\n' > {GIT_DIR}/info/exclude && git add -A && "
                     "git -c commit.gpgsign=false commit -q --allow-empty -m baseline && git rev-parse 'HEAD^{tree}'",
                "recording the starting files")
    tree = made.stdout.text.strip()
    if not re.fullmatch(r"[0-9a-f]{40}", tree):
        raise HarnessError(f"recording the starting files gave no tree id (got {tree[:80]!r})")
    index = box.read_file(f"{GIT_DIR}/index").data
    agent = (f"cd {WORKDIR} && git init -q -b main && printf '{exclude}\\n' >> .git/info/exclude && "
             "git config user.name agent && git config user.email agent@sandbox && "
             f"git config commit.gpgsign false && cp -R {GIT_DIR}/objects/. .git/objects/ && "
             f"cp {GIT_DIR}/index .git/index && git commit -q --allow-empty -m 'starting state'")
    _git(box, agent, "making /workspace a git repository",
         env={**GIT_IDENTITY, "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/tmp/harness"})
    return Baseline(tree, index)


def sandbox_patch(box: Sandbox, baseline: Baseline) -> str:
    """The agent's change as a unified diff (a/<path> b/<path>) against the starting files, whose tree
    id and index the host recorded at the start.

    The baseline sits outside /workspace, where the agent's own git use never reaches it, but a process
    of the agent's user could still write there. So before the diff its config, exclude file, hooks,
    alternates and grafts are put back to ours, replace refs are ignored, `git fsck` proves that every
    object is what its id says, and the index is the host's copy of the starting one: a baseline
    altered in any way that matters gives an error, never a patch against other starting files.

    The restored index lets `git add -A` hash only the files whose stat data changed. That is safe
    against an agent that rewrites a file and puts its size and mtime back: git also compares the
    inode and the ctime (`core.trustctime`, `core.checkStat=default`, set here), which no process
    without CAP_SYS_TIME can set back.

    Raises:
        HarnessError: the baseline was altered (fsck failed, `tree` is missing) or git failed.
    """
    tree = baseline.tree
    if not re.fullmatch(r"[0-9a-f]{40}", tree):
        raise HarnessError(f"sandbox_patch: {tree!r} is not a git tree id")
    exclude = "\\n".join(EXCLUDE)
    reset = (f"rm -rf {GIT_DIR}/hooks {GIT_DIR}/info {GIT_DIR}/objects/info/alternates "
             f"{GIT_DIR}/objects/info/http-alternates {GIT_DIR}/index {GIT_DIR}/config && "
             f"mkdir -p {GIT_DIR}/info && printf '{exclude}\\n' > {GIT_DIR}/info/exclude && "
             f"printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\ttrustctime = true\\n"
             f"\\tcheckStat = default\\n' > {GIT_DIR}/config")
    _git(box, reset, "resetting the baseline's settings")
    check = box.exec(f"git fsck --full --strict --no-dangling --no-progress && git cat-file -e {tree}^{{tree}}",
                     timeout=300, env=GIT_ENV, save_output=False)
    if not check.ok:
        raise HarnessError("the baseline of the starting files in the sandbox was altered (git fsck or the "
                           f"recorded tree {tree[:12]} failed): {(check.stderr.text or check.stdout.text)[-600:]}; "
                           "no patch is computed against altered starting files")
    box.write_file(f"{GIT_DIR}/index", baseline.index)
    _git(box, f"git add -A && git diff --cached --binary --no-color --no-ext-diff "
              f"--no-textconv {tree} > {PATCH_FILE}", "computing the patch")
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

