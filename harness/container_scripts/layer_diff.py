"""The instance's layer: run as root (with CAP_DAC_READ_SEARCH, to read whatever the build's user wrote)
by the system interpreter, isolated (`python3 -I -S`; Debian's, 3.9 and up: no newer syntax), from a
root-owned folder, before the build script ("before": the names, and the start) and after it ("after":
the layer). Nothing the build's user runs can change this script, its notes or the layer: a process
left behind by the project's install cannot forge the layer, which may only hold what that user could
change, with the true owners and modes, as `docker commit` would.

Shipped into the build container as /opt/harness/layer/layer.py by `harness.environments.instance_layer`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

HERE = "/opt/harness/layer"
BEFORE, STARTED, LAYER = HERE + "/before", HERE + "/started", HERE + "/layer.tar"
STEPS = "/opt/harness/instance"          # the build's steps
PROJECT = "/opt/harness/project"         # the project archive's folder (the host adds it to the layer)


def mount_points() -> set[str]:
    with open("/proc/self/mountinfo") as handle:
        points = {line.split()[4].replace("\\040", " ") for line in handle}
    return points - {"/"}


def outside() -> set[str]:
    """The container's own filesystem: never its mounts (the tmpfs /workspace, /tmp, /home/agent; docker's
    /etc/hosts), this folder, the build's steps nor the project archive."""
    return mount_points() | {"/proc", "/sys", "/dev", HERE, STEPS, PROJECT}


def found(left_out: set[str], *tests: str) -> list[str]:
    out = subprocess.run(["/usr/bin/find", "/", "-xdev", *tests, "-print0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout
    paths = (p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p)
    skip = tuple(top + "/" for top in left_out)
    return [p for p in paths if p != "/" and p not in left_out and not p.startswith(skip)]


def before(left_out: set[str]) -> None:
    """The names only (a stat of every file through fuse-overlayfs took seconds), and the start."""
    with open(BEFORE, "wb") as handle:
        handle.write("\0".join(found(left_out)).encode("utf-8", "surrogateescape"))
    open(STARTED, "w").close()


def after(left_out: set[str]) -> None:
    """Every entry whose status changed since the start (the kernel sets the ctime of whatever is
    written, created, renamed, linked or chmod-ed, and nothing sets it back), and a whiteout (.wh.NAME)
    for each listed entry that is gone and whose folder stays; a folder comes before what it holds."""
    changed = sorted(found(left_out, "-cnewer", STARTED))
    with open(BEFORE, "rb") as handle:
        listed = [p.decode("utf-8", "surrogateescape") for p in handle.read().split(b"\0") if p]
    gone = set(listed) - set(found(left_out))
    with tarfile.open(LAYER, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in changed:
            tar.add(path, arcname=path.lstrip("/"), recursive=False)
        for path in sorted(gone):
            if os.path.dirname(path) not in gone:
                name = os.path.join(os.path.dirname(path), ".wh." + os.path.basename(path))
                tar.addfile(tarfile.TarInfo(name.lstrip("/")))
    print(f"layer: {len(changed)} entries changed or added, {len(gone)} removed")


if __name__ == "__main__":
    before(outside()) if sys.argv[1:] == ["before"] else after(outside())
