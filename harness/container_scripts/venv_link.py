"""The harness venv for a process started through a link to its python from outside it.

Python 3.9 finds a venv's pyvenv.cfg only beside the program it was started as: a process started
through a link to the venv's python from elsewhere runs as the system interpreter without the venv.
tox-current-env makes exactly such links (.tox/py39/bin/python -> sys.executable), and sphinx 3.4+
runs its tests as `python -X dev -m pytest` through them (docutils missing, every test failed).

Installed into an instance image as the system interpreter's `harness_venv_link` module (Debian's
Python, 3.9 and up: no newer syntax), imported by a .pth file of its site folder at every start, it
puts the venv's site-packages (and its .pth files: the project's egg-link) before the system's
dist-packages in such a process, and only there. Under any other name (imported on the host) it does
nothing.
"""

from __future__ import annotations

import os
import site
import sys

VENV = "/opt/harness/venv"
VENV_BIN = VENV + "/bin"


def through_venv_link() -> bool:
    path = sys.executable
    for _ in range(16):
        if not path or not os.path.islink(path):
            return False
        target = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
        if os.path.dirname(target) == VENV_BIN:
            return os.path.dirname(path) != VENV_BIN
        path = target
    return False


def add_venv() -> None:
    import glob  # noqa: PLC0415 - only where it is needed: this module is loaded at every interpreter start

    before = list(sys.path)
    for folder in glob.glob(VENV + "/lib/python*/site-packages"):
        site.addsitedir(folder)
    added = [p for p in sys.path if p not in before]
    rest = [p for p in sys.path if p not in added]
    at = next((i for i, p in enumerate(rest) if p.endswith("dist-packages")), len(rest))
    sys.path[:] = rest[:at] + added + rest[at:]


if __name__ == "harness_venv_link" and sys.prefix == sys.base_prefix and through_venv_link():
    add_venv()
