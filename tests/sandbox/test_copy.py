"""Files copied out of the sandbox never bring host files with them and never land outside `dest`.

The sandbox's files are written by the agent, so copy-out treats them as hostile: symlinks are
copied as links (never followed) and only when they point inside the copied tree; absolute paths,
`..`, device files and hard links are refused; size and file count are capped.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import CopyError, SandboxError
from sandbox.transfer import safe_extract
from tests.sandbox.conftest import make_spec

CAP_BYTES, CAP_FILES = 10 * 1024 * 1024, 1000


def test_copy_out_round_trips_files_dirs_and_inside_links(sandbox: DockerSandbox, tmp_path: Path) -> None:
    sandbox.exec("mkdir -p docs && echo hi > docs/a.txt && ln -s a.txt docs/link && ln -s ../README.md docs/up",
                 timeout=10)
    written = sandbox.copy_out(tmp_path / "out")
    assert {"README.md", "pkg/__init__.py", "docs/a.txt", "docs/link", "docs/up"} <= set(written)
    assert (tmp_path / "out" / "docs" / "link").read_text() == "hi\n"
    assert (tmp_path / "out" / "docs" / "up").read_text() == "a small project\n"


@pytest.mark.parametrize("target", ["/etc/passwd", "../../../../etc/passwd", "/proc/self/environ", ".."])
def test_symlink_planted_in_the_workspace_is_refused_on_copy_out(sandbox: DockerSandbox, tmp_path: Path,
                                                                 target: str) -> None:
    sandbox.exec(f"ln -s {target} leak", timeout=10)
    with pytest.raises(CopyError, match=r"refusing to copy out symlink 'leak' -> .*: it points outside"):
        sandbox.copy_out(tmp_path / "out")
    assert not (tmp_path / "out" / "leak").exists() and not (tmp_path / "out" / "leak").is_symlink()


def test_symlinks_chained_to_escape_are_refused(sandbox: DockerSandbox, tmp_path: Path) -> None:
    sandbox.exec("ln -s . here && ln -s here/.. escape", timeout=10)
    with pytest.raises(CopyError, match="escape"):
        sandbox.copy_out(tmp_path / "out")
    assert not (tmp_path / "out" / "escape").is_symlink()


def test_hard_links_inside_the_workspace_are_copied_as_files(sandbox: DockerSandbox, tmp_path: Path) -> None:
    sandbox.exec("echo data > one && ln one two", timeout=10)
    sandbox.copy_out(tmp_path / "out")
    assert (tmp_path / "out" / "two").read_text() == "data\n"
    assert not (tmp_path / "out" / "two").is_symlink()


def test_fifos_and_sockets_in_the_workspace_are_skipped(sandbox: DockerSandbox, tmp_path: Path) -> None:
    sandbox.exec("mkfifo pipe && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'",
                 timeout=10)
    written = sandbox.copy_out(tmp_path / "out")
    assert "pipe" not in written and "sock" not in written and "README.md" in written


def test_copy_out_refuses_more_than_the_file_cap(sandbox_image: str, tmp_path: Path) -> None:
    spec = replace(make_spec(sandbox_image), max_copy_files=50)
    with DockerSandbox(spec) as box:
        box.exec("mkdir many && touch many/f$(seq -s ' many/f' 1 60)", timeout=10)
        with pytest.raises(CopyError, match="more than the copy limit"):
            box.copy_out(tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buf.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    return info


@pytest.mark.parametrize("member, message", [
    (_member("/etc/evil"), r"refusing to copy out '/etc/evil': absolute paths and '\.\.' are not allowed"),
    (_member("a/../../evil"), r"refusing to copy out 'a/\.\./\.\./evil': absolute paths and '\.\.'"),
    (_member("dev", tarfile.CHRTYPE), r"refusing to copy out 'dev': .* \(this is a device file\)"),
    (_member("blk", tarfile.BLKTYPE), r"\(this is a device file\)"),
    (_member("fifo", tarfile.FIFOTYPE), r"\(this is a fifo\)"),
    (_member("hard", tarfile.LNKTYPE, "/etc/passwd"), r"\(this is a hard link\)"),
    (_member("abs", tarfile.SYMTYPE, "/etc"), r"symlink 'abs' -> '/etc': it points outside"),
])
def test_unsafe_archive_members_are_refused_and_nothing_is_written(tmp_path: Path, member: tarfile.TarInfo,
                                                                   message: str) -> None:
    data = _tar((_member("first.txt"), b"ok"), (member, b"x"))
    with pytest.raises(CopyError, match=message):
        safe_extract(data, tmp_path / "dest", CAP_BYTES, CAP_FILES)
    assert list((tmp_path / "dest").iterdir()) == []
    assert not (tmp_path / "evil").exists()


def test_a_member_written_through_a_symlinked_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    data = _tar((_member("here", tarfile.SYMTYPE, "."), b""), (_member("up", tarfile.SYMTYPE, "here/.."), b""),
                (_member("up/outside/evil"), b"x"))
    with pytest.raises(CopyError):
        safe_extract(data, tmp_path / "dest", CAP_BYTES, CAP_FILES)
    assert not (outside / "evil").exists()


def test_a_safe_archive_is_extracted(tmp_path: Path) -> None:
    data = _tar((_member("d", tarfile.DIRTYPE), b""), (_member("d/f.txt"), b"content"),
                (_member("d/l", tarfile.SYMTYPE, "f.txt"), b""))
    assert safe_extract(data, tmp_path / "dest", CAP_BYTES, CAP_FILES) == ["d", "d/f.txt", "d/l"]
    assert (tmp_path / "dest" / "d" / "l").read_text() == "content"


def test_size_and_count_caps_are_enforced_on_extract(tmp_path: Path) -> None:
    big = _tar((_member("big"), b"x" * 2000))
    with pytest.raises(CopyError, match="2000 bytes, over the cap of 1000"):
        safe_extract(big, tmp_path / "a", 1000, CAP_FILES)
    many = _tar(*((_member(f"f{i}"), b"") for i in range(5)))
    with pytest.raises(CopyError, match="5 entries, over the cap of 4"):
        safe_extract(many, tmp_path / "b", CAP_BYTES, 4)


def test_copy_in_never_follows_host_symlinks(sandbox_image: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print(1)\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    (project / "link").symlink_to(secret)
    with DockerSandbox(make_spec(sandbox_image, project_dir=project)) as box:
        listing = box.exec("readlink link; cat link; cat main.py", timeout=10)
    assert listing.stdout.text == f"{secret}\nprint(1)\n"           # the link came in as a link, dangling
    assert "host secret" not in listing.stdout.text + listing.stderr.text


@pytest.mark.parametrize("links", [
    [("a", "b"), ("b", "a")],                         # a loop
    [("a", "b"), ("b", "../outside")],                # a link to a link that leaves
    [("d", "."), ("e", "d/../..")],                   # `..` after a link to the top
])
def test_links_that_leave_through_other_links_or_loop_are_refused(tmp_path: Path,
                                                                  links: list[tuple[str, str]]) -> None:
    data = _tar(*((_member(name, tarfile.SYMTYPE, target), b"") for name, target in links))
    with pytest.raises(CopyError, match="points outside the copied directory"):
        safe_extract(data, tmp_path / "dest", CAP_BYTES, CAP_FILES)
    assert list((tmp_path / "dest").iterdir()) == []


def test_copying_out_twice_into_the_same_folder_replaces_what_is_there(sandbox: DockerSandbox,
                                                                       tmp_path: Path) -> None:
    sandbox.exec("ln -s README.md link", timeout=10)
    sandbox.copy_out(tmp_path / "out")
    sandbox.exec("echo v2 > README.md", timeout=10)
    sandbox.copy_out(tmp_path / "out")
    assert (tmp_path / "out" / "link").read_text() == "v2\n"


def test_copy_in_refuses_a_project_over_the_caps_and_leaves_no_container(
        sandbox_image: str, tmp_path: Path, docker_client) -> None:  # type: ignore[no-untyped-def]
    project = tmp_path / "big"
    project.mkdir()
    for i in range(30):
        (project / f"f{i}.txt").write_text("x")
    spec = replace(make_spec(sandbox_image, project_dir=project), max_copy_files=20)
    with pytest.raises(CopyError, match=r"holds more than the copy limit \(20 files or .* raise "
                                         r"SandboxSpec.max_copy_bytes/max_copy_files"):
        with DockerSandbox(spec):
            pass
    assert docker_client.containers.list(all=True, filters={"label": f"harness.session={spec.session}"}) == []


def test_copy_in_keeps_odd_names_as_names_and_hard_links_as_files(sandbox_image: str, tmp_path: Path) -> None:
    project = tmp_path / "odd"
    project.mkdir()
    names = ["-rf", "--checkpoint-action=exec=touch pwned", "new\nline.txt", "space name.py", "ünï.txt"]
    for n, name in enumerate(names):
        (project / name).write_text(f"file {n}\n")
    (project / "twin").hardlink_to(project / "space name.py")
    with DockerSandbox(make_spec(sandbox_image, project_dir=project)) as box:
        listing = box.exec("find . -maxdepth 1 -type f -print0 | sort -z | xargs -0 -n1 printf '%s|'; "
                           "stat -c %h twin; cat twin; ls /workspace/pwned /tmp/pwned 2>&1 | wc -l", timeout=30)
        text = listing.stdout.text
        for name in ["-rf", "--checkpoint-action=exec=touch pwned", "space name.py", "ünï.txt", "twin"]:
            assert f"./{name}|" in text
        assert "./new\nline.txt|" in text and "1\nfile 3\n" in text   # the twin: its own file, one link
        assert not (project / "pwned").exists()


def test_the_server_refuses_an_archive_member_beneath_one_of_its_links(sandbox: DockerSandbox) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        link = tarfile.TarInfo("out")
        link.type, link.linkname = tarfile.SYMTYPE, "/tmp"
        tar.addfile(link)
        data = b"planted\n"
        member = tarfile.TarInfo("out/planted.txt")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    with pytest.raises(SandboxError, match="refusing tar member 'out/planted.txt'"):
        sandbox._live().put_tar(buf.getvalue(), "/workspace")
    assert sandbox.exec("ls /tmp/planted.txt /workspace/out", timeout=10).exit_code != 0
