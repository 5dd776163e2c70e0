"""Running an agent's invocation in a started sandbox: its files written, then its argv run.

    run_invocation(box, invocation, timeout)   the ExecResult of the agent's whole run
    write_files(box, invocation)               RUN_DIR made and `invocation.files` written (the first half)
    command_line(invocation)                   its argv quoted into one bash command line (the second half)

The runner of `harness run --agent` (and the tests) go through here, so every agent is started the
same way: RUN_DIR made, each file written through the sandbox's channel (never through a shell), then
`argv` run in `cwd` with `env`.
"""

from __future__ import annotations

import shlex

from harness.external.spec import RUN_DIR, AgentInvocation
from sandbox.api import ExecResult, Sandbox

__all__ = ["command_line", "run_invocation", "write_files"]


def write_files(box: Sandbox, invocation: AgentInvocation) -> None:
    """Make RUN_DIR and the folders of `invocation.files` in `box`, then write each file.

    Raises:
        PermissionError: a folder or file could not be made (as `Sandbox.write_file` raises it).
        ChannelClosed: the channel died.
    """
    folders = sorted({RUN_DIR, *(path.rsplit("/", 1)[0] for path in invocation.files)})
    made = box.exec(f"mkdir -p -- {' '.join(shlex.quote(f) for f in folders)}", timeout=30.0, save_output=False)
    if not made.ok:
        raise PermissionError(f"making {folders} in the sandbox failed (exit {made.exit_code}): "
                              f"{made.stderr.text[-400:]}")
    for path, text in invocation.files.items():
        box.write_file(path, text.encode("utf-8", errors="surrogateescape"))


def command_line(invocation: AgentInvocation) -> str:
    """The invocation's argv as one bash command line, each argument quoted."""
    return shlex.join(invocation.argv)


def run_invocation(box: Sandbox, invocation: AgentInvocation, timeout: float) -> ExecResult:
    """Write the invocation's files into `box`, then run its argv; a timeout or a non-zero exit is the result.

    Raises:
        PermissionError, ChannelClosed: as `write_files` raises them.
    """
    write_files(box, invocation)
    return box.exec(command_line(invocation), timeout=timeout, cwd=invocation.cwd, env=dict(invocation.env))
