"""One repair session of our own agent loop, and the workspace every session kind is assembled from.

Modules, lowest first (each imports only those before it, `tests/test_imports.py` holds the order):
`history` (the window of observations the model sees), `trajectory` (the session's record on disk),
`workspace` (the git baseline of the starting files, the patch, the replay of a resumed run),
`assembly` (the one place a sandbox, its baseline, catalog and context are put together:
`open_workspace`, `open_task_workspace`; sessions, `harness mcp`, `harness exec`/`shell`, the
framework adapters and grading's specs all come from it), `loop` (the agent loop and its contract),
`verdict` (the tests' verdict in a fresh sandbox), `session` (one repair session, end to end) and
`inplace` (repair in place: a task from an operator's folder, base.json for `harness apply`).
"""

from harness.agent.assembly import (
    Workspace,
    WorkspaceKind,
    open_task_workspace,
    open_workspace,
    sandbox_spec,
    session_catalog,
    session_image,
    task_spec,
)

__all__ = ["Workspace", "WorkspaceKind", "open_task_workspace", "open_workspace", "sandbox_spec", "session_catalog",
           "session_image", "task_spec"]
