"""Domain types and host-side helpers that every layer may import.

Modules here import only the standard library, third-party libraries and the bottom-layer modules
`harness.checks` and `harness.errors`; never session, loop, tools, models, approval, evaluation or cli.
"""

from typing import TYPE_CHECKING

from harness.core.records import (
    GRADED_STATUSES,
    MAX_EPOCHS,
    AttemptStats,
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
from harness.core.task import (
    Environment,
    Task,
    check_task,
    find_task_dirs,
    install_extras,
    load_task,
    own_environment,
    task_from_meta,
)
from sandbox.surface import lazy_names

__all__ = [
    "Applied", "apply_to_tree", "AttemptStats", "binary_changes", "binary_files", "BinaryChange", "BinaryPatchError",
    "blob_id", "cache_dir", "check_branch", "check_meta", "check_patch", "check_task", "checkout_commit", "clone_url",
    "commit_to_branch", "compare_reports", "DEFAULT_URL_TEMPLATE", "describe", "describe_binary", "DoneRecord",
    "Environment", "EvalReport", "EvalRun", "extract_tarball", "find_task_dirs", "GIT_IDENTITY", "GRADED_STATUSES",
    "hostgit", "install_extras", "InstanceReport", "InstanceStatus", "listening_socket", "load_run", "load_task",
    "MAX_EPOCHS", "mirror_clone", "NothingToApply", "own_environment", "patch_paths", "PatchConflict", "patched_files",
    "PatchOutcome", "process_tree", "ProjectFiles", "python_command", "Record", "RecordError", "require_unchanged",
    "RunRecord", "RunSettings", "select_files", "SessionResult", "SHOWN_BYTES", "shown_patch", "sources_root", "stage",
    "stats", "Task", "task_from_meta", "use_wal", "ZERO",
]


# Names other packages use, loaded on first use: importing the package costs nothing (sandbox.surface).
if TYPE_CHECKING:
    from harness.core import hostgit, stats
    from harness.core.apply import (
        Applied,
        NothingToApply,
        PatchConflict,
        RunRecord,
        apply_to_tree,
        binary_files,
        check_branch,
        commit_to_branch,
        describe_binary,
        load_run,
        patch_paths,
        require_unchanged,
    )
    from harness.core.binary_patch import (
        SHOWN_BYTES,
        ZERO,
        BinaryChange,
        BinaryPatchError,
        binary_changes,
        blob_id,
        describe,
        shown_patch,
    )
    from harness.core.comparison import compare_reports
    from harness.core.interpreter import python_command
    from harness.core.listen import listening_socket
    from harness.core.processes import process_tree
    from harness.core.project import ProjectFiles, select_files, stage
    from harness.core.sources import DEFAULT_URL_TEMPLATE, clone_url, mirror_clone
    from harness.core.sqlite import use_wal
    from harness.core.task import check_meta

__getattr__ = lazy_names(__name__, {
    "harness.core.apply": ("Applied", "NothingToApply", "PatchConflict", "RunRecord", "apply_to_tree", "binary_files",
                           "check_branch", "commit_to_branch", "describe_binary", "load_run", "patch_paths",
                           "require_unchanged"),
    "harness.core.binary_patch": ("BinaryChange", "BinaryPatchError", "SHOWN_BYTES", "ZERO", "binary_changes",
                                  "blob_id", "describe", "shown_patch"),
    "harness.core.comparison": ("compare_reports",),
    "harness.core.processes": ("process_tree",),
    "harness.core.hostgit": ("hostgit",),
    "harness.core.interpreter": ("python_command",),
    "harness.core.listen": ("listening_socket",),
    "harness.core.project": ("ProjectFiles", "select_files", "stage"),
    "harness.core.sources": ("DEFAULT_URL_TEMPLATE", "clone_url", "mirror_clone"),
    "harness.core.sqlite": ("use_wal",),
    "harness.core.stats": ("stats",),
    "harness.core.task": ("check_meta",),
})
