"""Runs the channel server (the image runs this file as /opt/harness/channel/__main__.py).

Its first act, before the server's own modules are imported, is to make itself non-dumpable
(`sandbox.server.guard`)."""

from __future__ import annotations

import sys

from sandbox.server.guard import make_undumpable

GUARDED = make_undumpable()

from sandbox.server.serve import main  # noqa: E402 - only once the guard is up: nothing of the agent's reads us

if __name__ == "__main__":
    sys.exit(main(GUARDED))
