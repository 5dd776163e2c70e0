"""The instance image: the environment image plus one layer holding only what the project's install
changed outside /workspace (the venv's links to it), the overlay of its install products and the
packed project.

Not a `docker build`: each build step costs seconds on a slow storage driver and the project's files
would be committed into a layer that no sandbox ever reads (its /workspace is a fresh tmpfs). Instead
one network-less container of the environment image, hardened as a sandbox is (`container_options(
layer_build=True)`: a writable root and one capability for the root-run layer script; the build's
processes run as the agent user, with no capabilities and no new privileges, in tmpfs /workspace,
/tmp and /home/agent), gets the project as the sandbox packs it and runs the recipe's build script
(`container_scripts/instance_build.py`); the layer script (`container_scripts/layer_diff.py`) compares
the container's own filesystem before and after the install (the mounts left out, as `docker commit`
leaves them) and writes what changed as a layer tar, whiteouts included. The host loads that layer on
top of the environment image with the test variables and the labels in its config (`load_image`):
`docker commit` would do the same, but on a storage driver without a native diff (fuse-overlayfs here)
it compares the whole image and took 4 to 6 s an instance.

The packed project stays in the image as `PROJECT_ARCHIVE`, owned by root and read-only (the build's
user cannot change it): a sandbox of the instance unpacks it into its /workspace instead of packing
and sending the project again (`SandboxSpec.project_from_image`), seconds saved twice per instance on a
django-sized tree.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
import tarfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import docker
import docker.errors
from docker.models.containers import Container

from harness.container_scripts import script_text
from harness.environments.errors import EnvironmentBuildError
from harness.environments.recipe import INSTANCE_DIR, LAYER_DIR, LAYER_SCRIPT, PROJECT_ARCHIVE, VENV
from sandbox import transfer
from sandbox.api import Limits, SandboxSpec
from sandbox.deployment import DockerDeployment
from sandbox.errors import SandboxError

MAX_BYTES = 1 << 30          # the project as packed for the build, at most
MAX_FILES = 200_000
BUILD_TIMEOUT = 3600         # seconds the project's install and checks may take
BUILD_SCRIPT = "build.py"    # container_scripts/instance_build.py, as it is named in INSTANCE_DIR
LAYER = f"{LAYER_DIR}/layer.tar"      # where the layer script writes the layer
# a project's install (a C extension compiled, a django-sized tree in the tmpfs) needs more than a session:
# every CPU, as the official harness gives, and files as large as a layer may be; the open files stay the
# sandbox's (a limit above the daemon's own hard limit makes the start fail)
BUILD_LIMITS = Limits(memory="8g", cpus=float(os.cpu_count() or 1), pids=4096, workspace_size="4g",
                      tmp_size="4g", home_size="1g", file_size=16 << 30)


def build_instance(client: docker.DockerClient, env_tag: str, tag: str, repo_dir: Path, files: dict[str, str],
                   env: dict[str, str], labels: dict[str, str], system_files: dict[str, bytes] | None = None) -> str:
    """Make `tag`: `env_tag` plus the layer of what the build script changed when it ran on `repo_dir`
    with the step `files` and the root-owned `system_files` (absolute path: content), with the variables
    `env` and `labels` added to its config; returns the build's output.

    Raises:
        EnvironmentBuildError: the build script failed (its output's tail in the message), or Docker did.
    """
    t0 = time.monotonic()
    try:
        packed = transfer.pack_directory(repo_dir, MAX_BYTES, MAX_FILES)
    except OSError as exc:
        raise EnvironmentBuildError(f"packing {repo_dir} for the instance build failed: {exc}") from exc
    spec = SandboxSpec(image=env_tag, session=f"envbuild-{uuid.uuid4().hex[:8]}", limits=BUILD_LIMITS,
                       labels={"harness.kind": "envbuild"}, direct_channel=False)
    deployment = DockerDeployment(spec, client, layer_build=True)
    try:
        deployment.start()      # on its lifeline: it ends with this process, however this process ends
    except (docker.errors.APIError, SandboxError) as exc:
        raise EnvironmentBuildError(f"creating the build container of {tag} on {env_tag} failed: {exc}") from exc
    container = deployment.container
    try:
        t1 = time.monotonic()
        # the system files are in place while the build runs (the stand-in's shims act on its import check)
        # and before the layer script's snapshot, so that the layer takes them from `system_files` alone
        if not (container.put_archive("/opt/harness", _project_tar(packed))
                and container.put_archive(INSTANCE_DIR, _steps_tar(files))
                and (not system_files or container.put_archive("/", _system_tar(system_files)))):
            raise EnvironmentBuildError(f"copying the project into the build container of {tag} failed")
        _layer_step(container, tag, "before")
        t2 = time.monotonic()
        code, output = container.exec_run(["timeout", str(BUILD_TIMEOUT), f"{VENV}/bin/python",
                                           f"{INSTANCE_DIR}/{BUILD_SCRIPT}"], user="1000:1000", workdir="/workspace")
        text = output.decode("utf-8", "replace") if isinstance(output, bytes) else str(output)
        if code != 0:
            tail = "\n".join(text.splitlines()[-60:])
            said = f"timed out after {BUILD_TIMEOUT}s" if code == 124 else f"exited {code}"
            raise EnvironmentBuildError(f"building {tag} on {env_tag} failed: the install step {said}:\n{tail}")
        t3 = time.monotonic()
        text += _layer_step(container, tag, "after")
        layer = _layer(_fetch(container, LAYER), packed, system_files or {})
        load_image(client, env_tag, tag, layer, env, labels, f"harness instance build of {tag}")
        return (f"{text.rstrip()}\nhost: pack {t1 - t0:.1f}s, start and copy {t2 - t1:.1f}s, "
                f"build script {t3 - t2:.1f}s, layer and load {time.monotonic() - t3:.1f}s\n")
    except docker.errors.APIError as exc:
        raise EnvironmentBuildError(f"building {tag} on {env_tag} failed: {exc}") from exc
    finally:
        deployment.stop()


def _layer_step(container: Container, tag: str, step: str) -> str:
    """Run the layer script's `step` as root with the system interpreter, isolated (-I -S: no site folder
    the build's user could have written to); returns what it printed."""
    code, output = container.exec_run(["/usr/bin/python3", "-I", "-S", f"{LAYER_DIR}/layer.py", step], user="0:0",
                                      workdir="/", environment={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else str(output)
    if code != 0:
        raise EnvironmentBuildError(f"building {tag}: the layer script's '{step}' step exited {code}:\n{text[-3000:]}")
    return text


def _fetch(container: Container, path: str) -> bytes:
    """The content of the regular file `path` in the container's own filesystem."""
    stream, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as outer:
        member = outer.next()
        handle = outer.extractfile(member) if member is not None else None
        if handle is None:
            raise EnvironmentBuildError(f"the build left no file at {path}")
        return handle.read()


def _layer(delta: bytes, packed: bytes, system_files: dict[str, bytes]) -> bytes:
    """The instance's layer: the project archive (root's, read-only), `system_files` (root's) and what the
    build changed."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar, \
            tarfile.open(fileobj=io.BytesIO(_project_tar(packed, with_layer_script=False))) as project, \
            tarfile.open(fileobj=io.BytesIO(delta)) as changed:
        for source, prefix in ((project, "opt/harness"), (changed, "")):
            for member in source:
                data = source.extractfile(member) if member.isfile() else None
                if prefix:
                    member.name = f"{prefix}/{member.name}"
                tar.addfile(member, data)
        _add_system_files(tar, system_files)
    return buf.getvalue()


def _system_tar(system_files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_system_files(tar, system_files)
    return buf.getvalue()


def _add_system_files(tar: tarfile.TarFile, system_files: dict[str, bytes]) -> None:
    """Root's regular files, read-only to others, at their absolute paths (relative in the archive)."""
    for path, content in sorted(system_files.items()):
        entry = tarfile.TarInfo(path.lstrip("/"))
        entry.size, entry.mode, entry.mtime = len(content), 0o644, int(time.time())
        tar.addfile(entry, io.BytesIO(content))


def load_image(client: docker.DockerClient, parent: str, tag: str, layer: bytes, env: dict[str, str],
               labels: dict[str, str], created_by: str) -> None:
    """Make `tag`: `parent` plus the uncompressed layer tar `layer`, its config the parent's with `env`
    and `labels` added, by `docker load` of an archive that holds only the new layer (the daemon has the
    parent's). `docker commit` would diff the whole filesystem on storage drivers without a native diff
    (fuse-overlayfs here: 4 to 6 s an instance, whatever the layer's size); this costs the layer's size.

    Raises:
        EnvironmentBuildError: Docker refused the archive.
    """
    info = client.images.get(parent).attrs
    parents = list(info["RootFS"]["Layers"])
    config = dict(info["Config"] or {})
    variables = [item for item in config.get("Env") or [] if item.partition("=")[0] not in env]
    config["Env"] = variables + [f"{name}={value}" for name, value in env.items()]
    config["Labels"] = {**(config.get("Labels") or {}), **labels}
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    history = [{"created": now, "created_by": f"layer {n} of {parent}"} for n in range(1, len(parents) + 1)]
    image = {"architecture": info.get("Architecture") or "amd64", "os": info.get("Os") or "linux", "created": now,
             "config": config, "rootfs": {"type": "layers", "diff_ids": [*parents, diff_id]},
             "history": [*history, {"created": now, "created_by": created_by}]}
    blob = json.dumps(image).encode()
    config_name = hashlib.sha256(blob).hexdigest() + ".json"
    layer_names = [f"{d.partition(':')[2]}/layer.tar" for d in [*parents, diff_id]]
    manifest = [{"Config": config_name, "RepoTags": [tag], "Layers": layer_names}]
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in ((config_name, blob), ("manifest.json", json.dumps(manifest).encode()),
                           (layer_names[-1], layer)):
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    try:
        client.images.load(archive.getvalue())
    except docker.errors.APIError as exc:
        raise EnvironmentBuildError(f"loading {tag} (the layer of its build on {parent}) failed: {exc}") from exc


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


def _project_tar(packed: bytes, with_layer_script: bool = True) -> bytes:
    """A tar (to unpack in /opt/harness) of PROJECT_ARCHIVE's folder holding the packed project as its one
    file (the build script and each sandbox unpack it into the /workspace tmpfs), root's and read-only,
    and of LAYER_DIR with the layer script, root's alone."""
    now = int(time.time())
    entries: list[tuple[str, bytes | None, int]] = [
        (posixpath.dirname(PROJECT_ARCHIVE), None, 0o755), (PROJECT_ARCHIVE, packed, 0o444)]
    if with_layer_script:
        entries += [(LAYER_DIR, None, 0o700), (f"{LAYER_DIR}/layer.py", script_text(LAYER_SCRIPT).encode(), 0o400)]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for path, data, mode in entries:
            info = tarfile.TarInfo(posixpath.relpath(path, "/opt/harness"))
            info.mode, info.uid, info.gid, info.mtime = mode, 0, 0, now
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
