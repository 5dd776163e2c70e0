"""The one place a framework adapter gets its sandbox: `open_for_adapter(Target)`.

Built on the one assembly a session's workspace comes from (`harness.agent.assembly.open_task_workspace`
and `open_workspace`): the same image, limits, hardening and git baseline of the starting files (so
`git diff` works in /workspace as agents expect, and the adapter can give the patch against the
starting files). No approver is wired: an adapter's commands have no network and no outbound tool.

Paths: the sandbox holds the project at WORKDIR (/workspace); SWE-bench agents are prompted for
/testbed. `sandbox_path` maps a working directory of /testbed (or under it) onto WORKDIR. A command
that names /testbed in its text is not rewritten (see docs/agents.md).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from harness.agent.assembly import (
    Workspace,
    WorkspaceKind,
    new_session_name,
    open_task_workspace,
    open_workspace,
    sandbox_spec,
    session_catalog,
)
from harness.config import Config, load
from harness.core.task import Task, load_task
from harness.environments import sandbox_image
from harness.errors import HarnessError
from harness.evaluation.instance_files import load_instances
from sandbox.api import WORKDIR, Sandbox

TESTBED = "/testbed"
"""Where SWE-bench agents expect the project; the sandbox holds it at WORKDIR."""


@dataclass(frozen=True)
class Target:
    """What an adapter's sandbox holds and which image it runs. At most one of `task`, `instances`
    and `project` names the files; with none the workspace starts empty.

    `task`: a task folder (task.json): its session image (requirements installed) and files.
    `instances` + `instance_id`: a SWE-bench instances file (JSON lines) and one row of it: the
    offline environment image `harness eval` builds for that instance, and its checkout
    (`repos`: the folder of local clones, as `harness eval --repos`).
    `project`: a host folder copied in, on the sandbox image.
    `image`: run this image instead of the one chosen above.
    """

    task: Path | None = None
    instances: Path | None = None
    instance_id: str | None = None
    repos: Path | None = None
    project: Path | None = None
    image: str | None = None
    kind: WorkspaceKind = "adapter"             # the `harness.kind` label (which adapter made it)
    labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, kind: WorkspaceKind, *, project: str | None = None, task: str | None = None,
                    instances: str | None = None, instance_id: str | None = None, repos: str | None = None,
                    image: str | None = None) -> Target:
        """The target an adapter's config names with strings (paths expanded, empty ones absent)."""
        def path(value: str | None) -> Path | None:
            return Path(value).expanduser() if value else None
        return cls(task=path(task), instances=path(instances), instance_id=instance_id, repos=path(repos),
                   project=path(project), image=image, kind=kind)

    def __post_init__(self) -> None:
        named = [n for n, v in (("task", self.task), ("instances", self.instances), ("project", self.project)) if v]
        if len(named) > 1:
            raise HarnessError(f"an adapter's sandbox holds one set of files; got {' and '.join(named)}; "
                               "give one of them, e.g. project=/path/to/repo")
        if (self.instances is None) != (self.instance_id is None):
            raise HarnessError("instances and instance_id go together: instances=swebench.jsonl "
                               f"instance_id=astropy__astropy-12907 (got instances={self.instances}, "
                               f"instance_id={self.instance_id!r})")


@dataclass
class AdapterSandbox:
    """A started workspace (sandbox and the baseline of its starting files) and the task it holds, if
    any. `close()` removes the sandbox."""

    workspace: Workspace
    task: Task | None

    @property
    def box(self) -> Sandbox:
        return self.workspace.sandbox

    @property
    def session(self) -> str:
        return self.workspace.session

    @property
    def image(self) -> str:
        return self.workspace.spec.image

    def patch(self) -> str:
        """The change made in WORKDIR since the start, as a unified diff (see `workspace.sandbox_patch`)."""
        return self.workspace.patch()

    def close(self) -> None:
        self.workspace.close()


def sandbox_path(path: str) -> str:
    """`path` inside the sandbox: /testbed and paths under it name the project, held at WORKDIR."""
    norm = posixpath.normpath(path) if path else path
    if norm == TESTBED or norm.startswith(TESTBED + "/"):
        return WORKDIR + norm[len(TESTBED):]
    return path


def target_task(target: Target) -> Task | None:
    """The task `target` names (a task folder or an instance row), or None for a bare project."""
    if target.task is not None:
        return load_task(target.task)
    if target.instances is not None and target.instance_id is not None:
        return load_instances(target.instances, target.repos, [target.instance_id])[0]
    return None


def open_for_adapter(target: Target, config: Config | None = None) -> AdapterSandbox:
    """A started, hardened sandbox for `target` (image built first if it does not exist yet), its
    starting files recorded. The caller closes it.

    Raises:
        HarnessError: the task or instance could not be read, or the baseline could not be made.
        SandboxError: Docker or the image build failed.
    """
    config = config or load()[0]
    task = target_task(target)
    catalog = session_catalog(config, servers=False)
    if task is not None:
        workspace = open_task_workspace(task, config, None, kind=target.kind, image=target.image,
                                        labels=target.labels, catalog=catalog)
    else:
        spec = sandbox_spec(target.kind, target.image or sandbox_image(config, config.sandbox.python),
                            new_session_name(target.kind), config.sandbox.limits, project_dir=target.project,
                            labels=target.labels)
        workspace = open_workspace(spec, config, None, catalog=catalog)
    return AdapterSandbox(workspace, task)
