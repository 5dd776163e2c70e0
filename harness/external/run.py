"""Running an agent's invocation in a started sandbox: its files written, then its argv run.

    run_invocation(box, invocation, timeout)   the ExecResult of the agent's whole run

The runner of `harness run --agent` (and the tests) go through here, so every agent is started the
same way: RUN_DIR made, each of `invocation.files` written through the sandbox's channel (never through
a shell), then `argv` quoted into one bash command line and run in `cwd` with `env`.
"""

from __future__ import annotations

import shlex

from harness.external.spec import RUN_DIR, AgentInvocation
from sandbox.api import ExecResult, Sandbox

__all__ = ["run_invocation"]


def run_invocation(box: Sandbox, invocation: AgentInvocation, timeout: float) -> ExecResult:
    """Write `invocation.files` into `box`, then run its argv; a timeout or a non-zero exit is the result.

    Raises:
        PermissionError: RUN_DIR or a file could not be made (as `Sandbox.write_file` raises it).
        ChannelClosed: the channel died.
    """
    folders = sorted({RUN_DIR, *(path.rsplit("/", 1)[0] for path in invocation.files)})
    made = box.exec(f"mkdir -p -- {' '.join(shlex.quote(f) for f in folders)}", timeout=30.0, save_output=False)
    if not made.ok:
        raise PermissionError(f"making {folders} in the sandbox failed (exit {made.exit_code}): "
                              f"{made.stderr.text[-400:]}")
    for path, text in invocation.files.items():
        box.write_file(path, text.encode("utf-8", errors="surrogateescape"))
    return box.exec(shlex.join(invocation.argv), timeout=timeout, cwd=invocation.cwd, env=dict(invocation.env))
