"""The one place a session's sandbox is assembled: its spec, its image, the sandbox, the baseline, the tools.

    workspace = open_task_workspace(task, config, approver)       # everything below, in one call
    with workspace:                                               # closing removes the sandbox
        result = workspace.execute(ToolUse("call-1", "bash", {"command": "git status"}))
        patch = workspace.patch()                                 # the change against the starting files

    session_image(task, config)               the image a task's sandbox runs in (environment included)
    task_spec(task, image, limits, kind, session)
    sandbox_spec(kind, image, session, limits, project_dir=...)
                                              every SandboxSpec the harness starts, labelled with its kind
    session_catalog(config, extra)            the tools a session offers: the loop's, the outbound ones
                                              (built-in, registered, `config.mcp`'s servers'), then `extra`
    open_workspace(spec, config, approver)    the sandbox started through `sandbox.factory` (from a warm
                                              pool when given), /workspace made the agent's git repository
                                              on a baseline the host keeps (`harness.agent.workspace`), the
                                              catalog and the ToolContext the calls run with

`harness run` and `harness eval` sessions, each MCP client's session, `harness exec`, `harness shell` and
`harness tasks new` all take their sandbox from here, so each sees the same /workspace; a new kind of
session (an agent of its own inside the sandbox, a model gateway, another framework's adapter) asks
`open_task_workspace` for the hardened workspace a session gets and needs nothing else. Grading and the
verdict's fresh sandbox take only the spec and `sandbox.factory.open_sandbox`: they hold no agent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.agent.workspace import Baseline, sandbox_patch, start_baseline
from harness.config import Config
from harness.core.task import Task
from harness.environments import ensure_task_image, sandbox_image
from harness.mcp.connect import mcp_actions
from harness.messages import ToolResult, ToolUse
from harness.tools.base import Approver, Tool, ToolContext
from harness.tools.catalog import Catalog, default_catalog
from harness.tools.outbound.registry import outbound_tools
from harness.tools.retrieval.chunk_cache import shared_cache
from harness.tools.retrieval.code_index import CodeIndex
from sandbox.api import Limits, Progress, Sandbox, SandboxSpec, quiet
from sandbox.factory import SandboxSource, open_sandbox

__all__ = ["Workspace", "WorkspaceKind", "new_session_name", "open_task_workspace", "open_workspace",
           "sandbox_spec", "session_catalog", "session_image", "task_spec"]

WorkspaceKind = Literal["session", "verdict", "mcp", "cli", "tasks-new", "grading", "adapter", "mini", "inspect",
                        "external"]
"""What a sandbox is for: its `harness.kind` label, which `harness sandbox ls` shows and tests select by."""


@dataclass
class Workspace:
    """A started sandbox holding a project, its baseline, and the catalog and context its calls run with.
    The caller owns it: `close()` (or leaving `with`) removes the sandbox."""

    spec: SandboxSpec
    sandbox: Sandbox
    baseline: Baseline
    catalog: Catalog
    context: ToolContext

    @property
    def session(self) -> str:
        return self.spec.session

    def execute(self, call: ToolUse) -> ToolResult:
        """One tool call, as the agent loop runs it (an error the model should see is a result)."""
        return self.catalog.execute(call, self.context)

    def patch(self) -> str:
        """The change to /workspace as a unified diff against the starting files (`sandbox_patch`).

        Raises:
            HarnessError: the baseline was altered in the sandbox.
            SandboxUnavailable: the sandbox died.
        """
        return sandbox_patch(self.sandbox, self.baseline)

    def close(self) -> None:
        """Stop warming the code index and remove the sandbox. Idempotent."""
        self.context.code_index.stop()
        self.sandbox.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def new_session_name(prefix: str) -> str:
    """A fresh session name, `prefix` and eight hex digits (a container's name and owner label carry it)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def session_image(task: Task, config: Config, progress: Progress = quiet) -> str:
    """The image a session of `task` runs in: the sandbox image (config.sandbox.image, or the one
    built for the task's Python), plus the task's requirements and install_cmd when it has any (the
    same environment image `harness eval` grades in)."""
    base = sandbox_image(config, task.python or config.sandbox.python, progress, task=task)
    if not task.requirements and not task.install_cmd and task.environment is None:
        return base
    return ensure_task_image(task, base, progress=progress)


def sandbox_spec(kind: WorkspaceKind, image: str, session: str, limits: Limits, *, project_dir: Path | None = None,
                 project_from_image: bool = False, labels: Mapping[str, str] | None = None) -> SandboxSpec:
    """The spec of a sandbox of `kind` (its `harness.kind` label; `labels` add the caller's own)."""
    return SandboxSpec(image=image, session=session, project_dir=project_dir, limits=limits,
                       labels={**(labels or {}), "harness.kind": kind}, project_from_image=project_from_image)


def task_spec(task: Task, image: str, limits: Limits, kind: WorkspaceKind, session: str,
              labels: Mapping[str, str] | None = None) -> SandboxSpec:
    """The spec of a sandbox holding `task`'s starting files (unpacked from the image when it is an
    environment image carrying them)."""
    return sandbox_spec(kind, image, session, limits, project_dir=task.repo_dir,
                        project_from_image=task.environment is not None, labels=labels)


def session_catalog(config: Config, extra: Sequence[Tool] = (), *, servers: bool = True) -> Catalog:
    """The tools of a session: the loop's, the outbound ones (with those of `config.mcp`'s servers unless
    `servers` is False), then `extra`.

    Raises:
        ConfigError: two outbound tools share a name, or an MCP server cannot start.
    """
    proxied = mcp_actions(config) if servers else []
    return default_catalog(config, extra=[*outbound_tools(config, extra=proxied), *extra])


def open_workspace(spec: SandboxSpec, config: Config, approver: Approver | None, *, catalog: Catalog | None = None,
                   pool: SandboxSource | None = None, code_index: CodeIndex | None = None,
                   key_scope: str = "") -> Workspace:
    """Start `spec`'s sandbox (taken from `pool` when given), make the baseline, and wire the catalog
    (`session_catalog(config)` unless given) and the context to `approver` (None: every outbound call
    is refused). `code_index`: one being warmed already; `key_scope`: whose outbound idempotency keys
    the calls' are ("" the session's).

    Raises:
        SandboxError: Docker failed; HarnessError: the baseline could not be made (the sandbox is removed).
    """
    catalog = catalog if catalog is not None else session_catalog(config)
    box = open_sandbox(spec, pool)
    try:
        baseline = start_baseline(box)
    except BaseException:
        box.close()
        raise
    context = ToolContext(sandbox=box, session=spec.session, approver=approver, key_scope=key_scope,
                          code_index=code_index if code_index is not None else CodeIndex(cache=shared_cache()))
    return Workspace(spec, box, baseline, catalog, context)


def open_task_workspace(task: Task, config: Config, approver: Approver | None, *,
                        kind: WorkspaceKind = "session", image: str | None = None, limits: Limits | None = None,
                        labels: Mapping[str, str] | None = None, pool: SandboxSource | None = None,
                        catalog: Catalog | None = None, progress: Progress = quiet) -> Workspace:
    """The hardened workspace a session of `task` gets, in one call: its image (built if needed), a new
    session name, the configured limits (or `limits`), then `open_workspace`."""
    image = image or session_image(task, config, progress)
    spec = task_spec(task, image, limits or config.sandbox.limits, kind, new_session_name(task.id), labels)
    return open_workspace(spec, config, approver, pool=pool, catalog=catalog)
