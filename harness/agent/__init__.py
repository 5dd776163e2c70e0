"""One repair session of our own agent loop, and the workspace every session kind is assembled from.

Modules, lowest first (each imports only those before it, `tests/test_imports.py` holds the order):
`history` (the window of observations the model sees), `trajectory` (the session's record on disk),
`workspace` (the git baseline of the starting files, the patch, the replay of a resumed run),
`assembly` (the one place a sandbox, its baseline, catalog and context are put together:
`open_workspace`, `open_task_workspace`; sessions, `harness mcp`, `harness exec`/`shell`, the
framework adapters and grading's specs all come from it), `loop` (the agent loop and its contract),
`verdict` (the tests' verdict in a fresh sandbox), `session` (one repair session, end to end),
`external` (a third-party agent's session inside the sandbox, its model calls through the gateway) and
`inplace` (repair in place: a task from an operator's folder, base.json for `harness apply`).
"""

from typing import TYPE_CHECKING

from sandbox.surface import lazy_names

__all__ = [
    "GIT_ENV", "load_trajectory", "new_session_name", "open_task_workspace", "open_workspace",
    "pinned_requirements", "read_problem", "repo_task", "RepoTask", "run_external_session", "run_session",
    "sandbox_spec",
    "selection_lines", "session_catalog", "session_image", "session_spec", "SessionOutcome", "StepEvent",
    "StopReason", "task_meta", "task_spec", "Workspace", "WorkspaceKind", "write_base", "write_task_dir",
]


# Loaded on first use: a module of the package imported alone (history, trajectory) does not pay for the
# whole loop (sandbox.surface).
if TYPE_CHECKING:
    from harness.agent.assembly import (
        Workspace,
        WorkspaceKind,
        new_session_name,
        open_task_workspace,
        open_workspace,
        sandbox_spec,
        session_catalog,
        session_image,
        task_spec,
    )
    from harness.agent.external import run_external_session
    from harness.agent.inplace import (
        RepoTask,
        pinned_requirements,
        read_problem,
        repo_task,
        selection_lines,
        task_meta,
        write_base,
        write_task_dir,
    )
    from harness.agent.loop import StepEvent, StopReason
    from harness.agent.session import SessionOutcome, run_session, session_spec
    from harness.agent.trajectory import load_trajectory
    from harness.agent.workspace import GIT_ENV

__getattr__ = lazy_names(__name__, {
    "harness.agent.assembly": ("Workspace", "WorkspaceKind", "new_session_name", "open_task_workspace",
                               "open_workspace", "sandbox_spec", "session_catalog", "session_image", "task_spec"),
    "harness.agent.external": ("run_external_session",),
    "harness.agent.inplace": ("RepoTask", "pinned_requirements", "read_problem", "repo_task", "selection_lines",
                              "task_meta", "write_base", "write_task_dir"),
    "harness.agent.loop": ("StepEvent", "StopReason"),
    "harness.agent.session": ("SessionOutcome", "run_session", "session_spec"),
    "harness.agent.trajectory": ("load_trajectory",),
    "harness.agent.workspace": ("GIT_ENV",),
})
