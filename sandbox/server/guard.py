"""The server's guard against the agent: it makes itself non-dumpable before anything else.

The server runs as the agent's user (only that user may signal the agent's processes, with no
capabilities), so while it is dumpable any process of that user may open its /proc/<pid>/mem, fd/
and environ, or ptrace it: write forged answers into its stdout, inject requests into its stdin,
rewrite it in memory (its `kill()`, and with it the leftover sweep). `__main__.py` calls
`make_undumpable` as its first statement, before the server's own modules are imported; the host
makes sure no process of the agent exists when a server starts (`sandbox/agent_sweep.py`), so
nothing is there to race it.
"""

from __future__ import annotations

import ctypes

PR_SET_DUMPABLE = 4
SUID_DUMP_DISABLE = 0


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE 0: the agent (same user) can no longer open this process's /proc files or ptrace it.

    Commands are not affected: exec() makes each of them dumpable again.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_DUMPABLE, SUID_DUMP_DISABLE, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
