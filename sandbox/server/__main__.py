"""Runs the channel server (the image runs this file as /opt/harness/channel/__main__.py), or with the
arguments `relay PORT` the loopback relay (`sandbox.server.relay`, its own `docker exec`, as nobody).

Its first act, before the server's own modules are imported, is to make itself non-dumpable
(`sandbox.server.guard`)."""

from __future__ import annotations

import sys

from sandbox.server.guard import make_undumpable

GUARDED = make_undumpable()

# only once the guard is up: nothing of the agent's reads us
if sys.argv[1:2] == ["relay"]:
    from sandbox.server.relay import main as relay_main  # noqa: E402

    if __name__ == "__main__":
        sys.exit(relay_main(sys.argv[2:], GUARDED))
else:
    from sandbox.server.serve import main  # noqa: E402

    if __name__ == "__main__":
        sys.exit(main(GUARDED))
