"""Runs the channel server (the image runs this file as /opt/harness/channel/__main__.py)."""

from __future__ import annotations

import sys

from sandbox.server.serve import main

if __name__ == "__main__":
    sys.exit(main())
