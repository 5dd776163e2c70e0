"""Domain types and host-side helpers that every layer may import.

Modules here import only the standard library, third-party libraries and the bottom-layer modules
`harness.checks` and `harness.errors`; never session, loop, tools, models, approval, evaluation or cli.
"""

from harness.core.records import (
    DoneRecord,
    EvalReport,
    EvalRun,
    InstanceReport,
    InstanceStatus,
    Record,
    RecordError,
    RunSettings,
    SessionResult,
)
from harness.core.sources import (
    GIT_IDENTITY,
    PatchOutcome,
    cache_dir,
    check_patch,
    checkout_commit,
    extract_tarball,
    patched_files,
    sources_root,
)
from harness.core.task import Environment, Task, check_task, find_task_dirs, load_task, task_from_meta

__all__ = [
    "DoneRecord", "EvalReport", "EvalRun", "InstanceReport", "InstanceStatus", "Record", "RecordError", "RunSettings",
    "SessionResult",
    "Environment", "GIT_IDENTITY", "PatchOutcome", "Task", "cache_dir", "check_patch", "check_task", "checkout_commit",
    "extract_tarball", "find_task_dirs", "load_task", "patched_files", "sources_root", "task_from_meta",
]
