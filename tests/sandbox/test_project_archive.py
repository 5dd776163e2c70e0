"""An image that carries its project packed (an instance image) gives it to each sandbox without the
host packing and sending the project again; the archive is root's, and only a plain path is taken."""

from __future__ import annotations

import io
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox import transfer
from sandbox.docker_sandbox import PROJECT_ARCHIVE_LABEL, DockerSandbox
from sandbox.errors import SandboxError
from tests.sandbox.conftest import make_spec

ARCHIVE = "/opt/harness/project/workspace.tar"


def _image_with_project(docker_client, base: str, project: Path, label: str) -> str:  # type: ignore[no-untyped-def]
    packed = transfer.pack_directory(project, 1 << 20, 100)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        top = tarfile.TarInfo("project")
        top.type, top.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(top)
        info = tarfile.TarInfo("project/workspace.tar")
        info.size, info.mode = len(packed), 0o444
        tar.addfile(info, io.BytesIO(packed))
    container = docker_client.containers.create(base, command=["true"], labels={"harness.test": "1"})
    tag = f"harness-test-archive:{uuid.uuid4().hex[:8]}"
    try:
        assert container.put_archive("/opt/harness", buf.getvalue())
        container.commit(repository=tag.split(":")[0], tag=tag.split(":")[1],
                         changes=[f'LABEL {PROJECT_ARCHIVE_LABEL}="{label}" harness.test="1"'])
    finally:
        container.remove(force=True)
    return tag


@pytest.fixture
def archived(docker_client, sandbox_image: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:  # type: ignore[no-untyped-def]
    project = tmp_path / "baked"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "mod.py").write_text("FROM_IMAGE = True\n")
    (project / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (project / "run.sh").chmod(0o755)
    tag = _image_with_project(docker_client, sandbox_image, project, ARCHIVE)
    yield tag, project
    docker_client.images.remove(tag, force=True)


def test_the_project_comes_from_the_image_when_asked(archived: tuple[str, Path], tmp_path: Path) -> None:
    tag, _ = archived
    elsewhere = tmp_path / "host-copy"          # what the host would have sent: never read
    elsewhere.mkdir()
    (elsewhere / "host_only.txt").write_text("from the host\n")
    spec = make_spec(tag, elsewhere)
    with DockerSandbox(replace(spec, project_from_image=True)) as box:
        listing = box.exec("find . -type f | sort && ./run.sh && stat -c '%U %a' " + ARCHIVE, timeout=30)
        assert listing.ok, listing.stderr.text
        assert listing.stdout.text == "./pkg/mod.py\n./run.sh\nran\nroot 444\n"
        assert not box.exec(f"echo x > {ARCHIVE}", timeout=10).ok          # the sandbox user cannot change it
    with DockerSandbox(spec) as box:                                         # not asked: the host's copy
        assert box.exec("ls", timeout=10).stdout.text == "host_only.txt\n"


def test_an_image_without_the_label_gets_the_hosts_copy(sandbox_image: str, project_dir: Path) -> None:
    spec = make_spec(sandbox_image, project_dir)
    with DockerSandbox(replace(spec, project_from_image=True)) as box:
        assert box.exec("cat README.md", timeout=10).stdout.text == "a small project\n"


@pytest.mark.parametrize("label", ["/opt/harness/project/workspace.tar; touch /tmp/pwned", "relative/path.tar",
                                   "/opt/../etc/shadow", "-/opt/x.tar"])
def test_only_a_plain_absolute_path_is_taken_from_the_label(docker_client, sandbox_image: str,  # type: ignore[no-untyped-def]
                                                             tmp_path: Path, label: str) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.txt").write_text("a\n")
    tag = _image_with_project(docker_client, sandbox_image, project, label)
    try:
        spec = make_spec(tag, project)
        with pytest.raises(SandboxError, match="expected a plain absolute path"):
            with DockerSandbox(replace(spec, project_from_image=True)):
                pass
    finally:
        docker_client.images.remove(tag, force=True)
