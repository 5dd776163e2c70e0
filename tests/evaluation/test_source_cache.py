"""The extracted-source cache shared by concurrent runs: a tree is replaced whole, never seen half removed,
and a tarball is not extracted again on every run."""

from __future__ import annotations

import io
import json
import tarfile
import threading
import time
from pathlib import Path

import pytest

from harness.core.sources import extract_tarball, sources_root
from harness.evaluation.instance_files import instance_source

FILES = 400


def project_tarball(path: Path, mtime: float = 1_500_000_000) -> Path:
    """A tarball made as `git archive` makes one: one top folder, every member dated at the commit."""
    with tarfile.open(path, "w:gz") as tar:
        top = tarfile.TarInfo("proj")
        top.type, top.mtime, top.mode = tarfile.DIRTYPE, mtime, 0o755
        tar.addfile(top)
        for n in range(FILES):
            data = f"x = {n}\n".encode()
            info = tarfile.TarInfo(f"proj/m{n}.py")
            info.size, info.mtime = len(data), mtime
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_tree_replaced_while_another_run_reads_it_is_never_missing(tmp_path: Path) -> None:
    root, dest = tmp_path / "sources", tmp_path / "sources" / "acme-1"
    root.mkdir()
    tarball = project_tarball(tmp_path / "acme-1.tar.gz")
    extract_tarball(tarball, dest, root)
    missing: list[str] = []
    done = threading.Event()

    def read() -> None:          # as the instance image's tree hash reads it: list, then read every file
        while not done.is_set():
            try:
                for path in sorted(dest.rglob("*.py")):
                    path.read_bytes()
            except FileNotFoundError as exc:
                missing.append(str(exc))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        workers = [threading.Thread(target=extract_tarball, args=(tarball, dest, root)) for _ in range(4)]
        for _ in range(3):
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            workers = [threading.Thread(target=extract_tarball, args=(tarball, dest, root)) for _ in range(4)]
    finally:
        done.set()
        reader.join()
    assert missing == []
    assert len(list(dest.glob("*.py"))) == FILES
    assert sorted(p.name for p in root.iterdir()) == ["acme-1"]      # no partial or old tree left behind


def test_a_tarball_is_extracted_once_not_on_every_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repos = tmp_path / "repos"
    repos.mkdir()
    project_tarball(repos / "acme__lib-1.tar.gz")       # its members dated 2017, the file itself today
    row = json.loads('{"instance_id": "acme__lib-1", "repo": "acme/lib", "base_commit": "' + "a" * 40 + '"}')
    dest = instance_source(row, repos)
    first = (dest / "m0.py").stat().st_ino
    time.sleep(0.01)
    assert instance_source(row, repos) == dest
    assert (dest / "m0.py").stat().st_ino == first       # the same tree: not extracted again
    assert dest.parent == sources_root()
