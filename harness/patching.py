"""A unified diff applied inside a sandbox, as SWE-bench applies a model's patch: `git apply`, else GNU
patch once its dry run passed. The patch is hostile (links to host folders, `..` paths, a file where a
folder was), so it is never applied on the host; a half-applied tree only ever exists in a throwaway
sandbox. Used by grading (`harness.evaluation.grading`) and by a session's verdict (`harness.session`),
which both apply a patch to a fresh sandbox holding only the starting files.
"""

from __future__ import annotations

import shlex

from harness.core.sources import GIT_APPLY, GNU_PATCH, PatchOutcome
from sandbox.api import Sandbox

STAGE_DIR = "/tmp/harness/grading"
_PATCH_ENV = {"GIT_CEILING_DIRECTORIES": "/"}


def apply_in_sandbox(box: Sandbox, patch: str, name: str) -> PatchOutcome:
    """Apply the unified diff `patch` to WORKDIR in `box`: `git apply`, else GNU patch once its dry
    run passed. The output records each command (`$ ...`) and what it said, stdout then stderr."""
    if not patch.strip():
        return PatchOutcome(True, "empty patch: nothing to apply")
    source = f"{STAGE_DIR}/{name}.patch"
    box.exec(f"mkdir -p {STAGE_DIR}", timeout=30, save_output=False)
    box.write_file(source, (patch if patch.endswith("\n") else patch + "\n").encode())
    said = []
    for cmd in (GIT_APPLY, (*GNU_PATCH, "--dry-run")):
        ok, text = _attempt(box, cmd, source)
        said.append(f"$ {' '.join(cmd)}\n{text}".rstrip())
        if ok and cmd[-1] == "--dry-run":
            ok, text = _attempt(box, cmd[:-1], source)     # the dry run passed: apply for real
            said.append(f"$ {' '.join(cmd[:-1])}\n{text}".rstrip())
        if ok:
            return PatchOutcome(True, "\n".join(said))
    return PatchOutcome(False, "\n".join(said))


def _attempt(box: Sandbox, cmd: tuple[str, ...], source: str) -> tuple[bool, str]:
    """Run `cmd < source` in WORKDIR; (succeeded, its stdout followed by its stderr), read back exactly."""
    out, err = f"{STAGE_DIR}/said.out", f"{STAGE_DIR}/said.err"
    result = box.exec(f"{shlex.join(cmd)} < {source} > {out} 2> {err}", timeout=120, env=_PATCH_ENV,
                      save_output=False)
    text = "".join(box.read_file(f).data.decode("utf-8", errors="replace") for f in (out, err))
    return result.ok, text
