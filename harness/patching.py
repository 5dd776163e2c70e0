"""A unified diff applied inside a sandbox, as SWE-bench 5.0 applies a model's patch.

The chain is that of `swebench/harness/run_evaluation.py` (`GIT_APPLY_CMDS`, 5.0.0 to 5.0.2, commit
7a21e05): the four commands below, in this order, each given the patch file; the first that exits 0
applied it. Before every command but the first the tree is put back as it was (the official harness
runs `git checkout -- . ; git clean -fd`, because a failed `--reject` or `patch` leaves half a patch
behind). When all four failed, `git apply --check --reverse` is asked in the tree the last one left:
if the whole patch reverses there, it is there, and it counts as applied ("verified already applied";
this is how a patch whose hunks are partly present already, e.g. SWE-bench's own pre-install edits
submitted with the fix, gets through `patch --forward`, which skips those hunks and exits 1).

The patch is hostile (links to host folders, `..` paths, a file where a folder was), so it is never
applied on the host; a half-applied tree only ever exists in a throwaway sandbox. Used by grading
(`harness.evaluation.grading`) and by a session's verdict (`harness.agent.session`), which both apply a
patch to a fresh sandbox holding only the starting files.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from harness.core.sources import PatchOutcome
from sandbox.api import WORKDIR, Sandbox
from sandbox.errors import SandboxError

STAGE_DIR = "/tmp/harness/grading"
_PATCH_ENV = {"GIT_CEILING_DIRECTORIES": "/"}

APPLY_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("git", "apply", "--verbose"),
    ("git", "apply", "--verbose", "--3way"),
    ("git", "apply", "--verbose", "--reject"),
    ("patch", "--batch", "--forward", "--fuzz=5", "-p1", "-i"),
)
"""SWE-bench 5.0's `GIT_APPLY_CMDS`, each followed by the patch file's path."""
REVERSE_CHECK = ("git", "apply", "--check", "--reverse")
"""Asked when every command failed: the patch is already wholly in the tree."""

_PRISTINE = f"{STAGE_DIR}/pristine.tar"


@dataclass(frozen=True)
class ChainOutcome(PatchOutcome):
    """A patch's outcome through the chain; `command` is the command that applied it (None when none did),
    followed by `+ git apply --check --reverse` when that check found it already applied."""

    command: str | None = None


def apply_in_sandbox(box: Sandbox, patch: str, name: str) -> ChainOutcome:
    """Apply the unified diff `patch` to WORKDIR in `box` with SWE-bench 5.0's chain (`APPLY_COMMANDS`,
    then `REVERSE_CHECK`). The output records each command (`$ ...`) and what it said, stdout then
    stderr, and the tree being put back between commands."""
    if not patch.strip():
        return ChainOutcome(True, "empty patch: nothing to apply", "empty patch")
    source = f"{STAGE_DIR}/{name}.patch"
    box.exec(f"mkdir -p {STAGE_DIR}", timeout=30, save_output=False)
    box.write_file(source, (patch if patch.endswith("\n") else patch + "\n").encode())
    said: list[str] = []
    for number, cmd in enumerate(APPLY_COMMANDS):
        if number == 1:          # `git apply` changes nothing when it fails: the tree is still the start
            _snapshot(box)
        if number >= 1:
            said.append(_restore(box))
        ok, text = _attempt(box, (*cmd, source))
        said.append(f"$ {shlex.join(cmd)} {name}.patch\n{text}".rstrip())
        if ok:
            return ChainOutcome(True, "\n".join(said), shlex.join(cmd))
    ok, text = _attempt(box, (*REVERSE_CHECK, source))
    said.append(f"$ {shlex.join(REVERSE_CHECK)} {name}.patch\n{text}".rstrip())
    if ok:
        said.append("the patch is already wholly in the tree: verified already applied")
        return ChainOutcome(True, "\n".join(said), f"{shlex.join(APPLY_COMMANDS[-1])} + {shlex.join(REVERSE_CHECK)}")
    return ChainOutcome(False, "\n".join(said), None)


def _snapshot(box: Sandbox) -> None:
    """Keep the tree as it is now (links as links, modes kept), to put back before each later command."""
    result = box.exec(f"tar -C {WORKDIR} -cf {_PRISTINE} .", timeout=600, save_output=False)
    if not result.ok:
        raise PatchChainError(f"could not keep the starting tree of sandbox {box.session} before the next "
                              f"patch command (exit {result.exit_code}): {result.stderr.text.strip()[-400:]}")


def _restore(box: Sandbox) -> str:
    """Put the tree back as `_snapshot` kept it: everything under WORKDIR removed (links are not followed),
    the kept tree unpacked. Returns the line the output records for it."""
    result = box.exec(f"find {WORKDIR} -mindepth 1 -delete && tar -C {WORKDIR} -xpf {_PRISTINE}", timeout=600,
                      save_output=False)
    if not result.ok:
        raise PatchChainError(f"could not put the starting tree of sandbox {box.session} back between patch "
                              f"commands (exit {result.exit_code}): {result.stderr.text.strip()[-400:]}")
    return "(the tree put back as it was before the first command)"


class PatchChainError(SandboxError):
    """The sandbox could not keep or put back the tree between two patch commands (an infrastructure
    failure, not the patch's)."""


def _attempt(box: Sandbox, cmd: tuple[str, ...]) -> tuple[bool, str]:
    """Run `cmd` in WORKDIR; (succeeded, its stdout followed by its stderr), read back exactly."""
    out, err = f"{STAGE_DIR}/said.out", f"{STAGE_DIR}/said.err"
    result = box.exec(f"{shlex.join(cmd)} < /dev/null > {out} 2> {err}", timeout=120, env=_PATCH_ENV,
                      save_output=False)
    text = "".join(box.read_file(f).data.decode("utf-8", errors="replace") for f in (out, err))
    return result.ok, text
