"""The instance image: the environment image plus one committed layer holding only what the project's
install changed outside /workspace (the venv's links to it) and the overlay of its install products.

Not a `docker build`: each build step costs seconds on a slow storage driver and the project's files
would be committed into a layer that no sandbox ever reads (its /workspace is a fresh tmpfs). Instead
one hardened, network-less container of the environment image (the agent user, no capabilities, no new
privileges, tmpfs /workspace, /tmp and /home/agent) gets the project as the sandbox packs it, runs the
recipe's build script (`venv.INSTANCE_BUILD`) and is committed with the test variables and the labels
as ENV and LABEL changes; the tmpfs mounts are not part of the commit.

The packed project stays in the image as `PROJECT_ARCHIVE`, owned by root and read-only (the build's
user cannot change it): a sandbox of the instance unpacks it into its /workspace instead of packing
and sending the project again (`SandboxSpec.project_from_image`), seconds saved twice per instance on a
django-sized tree.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
import time
import uuid
from pathlib import Path

import docker
import docker.errors

from harness.environments.errors import EnvironmentBuildError
from harness.environments.venv import INSTANCE_DIR, PROJECT_ARCHIVE, VENV
from sandbox import copy as copying
from sandbox.reaper import owner_labels

MAX_BYTES = 1 << 30          # the project as packed for the build, at most
MAX_FILES = 200_000
BUILD_TIMEOUT = 3600         # seconds the project's install and checks may take
_TMPFS = "rw,exec,nosuid,nodev,uid=1000,gid=1000,mode=0755"


def build_instance(client: docker.DockerClient, env_tag: str, tag: str, repo_dir: Path, files: dict[str, str],
                   changes: list[str]) -> str:
    """Commit `tag`: `env_tag` after the build script ran on `repo_dir` with the step `files`; returns
    the build's output.

    Raises:
        EnvironmentBuildError: the build script failed (its output's tail in the message), or Docker did.
    """
    t0 = time.monotonic()
    try:
        packed = copying.pack_directory(repo_dir, MAX_BYTES, MAX_FILES)
    except OSError as exc:
        raise EnvironmentBuildError(f"packing {repo_dir} for the instance build failed: {exc}") from exc
    session = f"envbuild-{uuid.uuid4().hex[:8]}"
    try:
        container = client.containers.create(
            env_tag, command=["sleep", "infinity"], user="1000:1000", working_dir="/workspace",
            network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges"], pids_limit=4096,
            tmpfs={"/workspace": f"{_TMPFS},size=4g", "/tmp": f"{_TMPFS},size=4g", "/home/agent": f"{_TMPFS},size=1g"},
            init=True, labels={**owner_labels(session), "harness.kind": "envbuild"},
            name=f"harness-{session}")
    except docker.errors.APIError as exc:
        raise EnvironmentBuildError(f"creating the build container of {tag} on {env_tag} failed: {exc}") from exc
    try:
        t1 = time.monotonic()
        container.start()
        if not (container.put_archive(posixpath.dirname(posixpath.dirname(PROJECT_ARCHIVE)), _project_tar(packed))
                and container.put_archive(INSTANCE_DIR, _steps_tar(files))):
            raise EnvironmentBuildError(f"copying the project into the build container of {tag} failed")
        t2 = time.monotonic()
        code, output = container.exec_run(["timeout", str(BUILD_TIMEOUT), f"{VENV}/bin/python",
                                           f"{INSTANCE_DIR}/build.py"], user="1000:1000", workdir="/workspace")
        text = output.decode("utf-8", "replace") if isinstance(output, bytes) else str(output)
        if code != 0:
            tail = "\n".join(text.splitlines()[-60:])
            said = f"timed out after {BUILD_TIMEOUT}s" if code == 124 else f"exited {code}"
            raise EnvironmentBuildError(f"building {tag} on {env_tag} failed: the install step {said}:\n{tail}")
        t3 = time.monotonic()
        container.commit(repository=tag.partition(":")[0], tag=tag.partition(":")[2], changes=changes)
        return (f"{text.rstrip()}\nhost: pack {t1 - t0:.1f}s, start and copy {t2 - t1:.1f}s, "
                f"build script {t3 - t2:.1f}s, commit {time.monotonic() - t3:.1f}s\n")
    except docker.errors.APIError as exc:
        raise EnvironmentBuildError(f"building {tag} on {env_tag} failed: {exc}") from exc
    finally:
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass


def _steps_tar(files: dict[str, str]) -> bytes:
    """A tar of the step files, the build's user's."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), 0o644, 1000, 1000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _project_tar(packed: bytes) -> bytes:
    """A tar holding PROJECT_ARCHIVE's folder and the packed project as its one file (one file to write on
    the container's filesystem; the build script and each sandbox unpack it into the /workspace tmpfs),
    root's and read-only."""
    folder = posixpath.basename(posixpath.dirname(PROJECT_ARCHIVE))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        top = tarfile.TarInfo(folder)
        top.type, top.mode, top.uid, top.gid = tarfile.DIRTYPE, 0o755, 0, 0
        tar.addfile(top)
        info = tarfile.TarInfo(f"{folder}/{posixpath.basename(PROJECT_ARCHIVE)}")
        info.size, info.mode, info.uid, info.gid = len(packed), 0o444, 0, 0
        tar.addfile(info, io.BytesIO(packed))
    return buf.getvalue()
