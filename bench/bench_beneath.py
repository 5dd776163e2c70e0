"""Figures of link-free host reads, printed (not asserted):

    .venv/bin/python bench/bench_beneath.py [FILES]

Reads every file of a generated tree (FILES files, default 6000, four folders deep, as in a
django-sized checkout) three ways in the same run: `os.open(path, O_NOFOLLOW)` (the baseline, which
checks the last component only), `checks.open_beneath` through openat2, and `checks.open_beneath`
through the per-component walk; then `select_files` + `stage` of the tree as a git checkout.
Best of 5 each, with the ratio to the baseline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import checks  # noqa: E402
from harness.core.project import select_files, stage  # noqa: E402
from harness.core.sources import GIT_IDENTITY  # noqa: E402


def make_tree(root: Path, files: int) -> list[str]:
    rels = []
    for i in range(files):
        rel = f"pkg{i % 12}/sub{i % 7}/deep{i % 5}/mod{i}.py"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n" * 40)
        rels.append(rel)
    env = {**os.environ, **GIT_IDENTITY}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "tree"]):
        subprocess.run(["git", *args], cwd=root, check=True, env=env, capture_output=True)
    return rels


def best(fn: Callable[[], object], rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def read_all(opener: Callable[[str], int], rels: list[str]) -> None:
    for rel in rels:
        fd = opener(rel)
        os.read(fd, 1 << 16)
        os.close(fd)


def main() -> None:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 6000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        rels = make_tree(root, files)
        base = best(lambda: read_all(lambda r: os.open(root / r, os.O_RDONLY | os.O_NOFOLLOW), rels))
        print(f"{files} files read, best of 5")
        print(f"  os.open O_NOFOLLOW (last component only): {base * 1000:7.0f} ms  1.00x")
        for name, setting in (("open_beneath, openat2", None), ("open_beneath, per-component walk", False)):
            checks._openat2_ok = setting
            took = best(lambda: read_all(lambda r: checks.open_beneath(root, r), rels))
            print(f"  {name + ':':41} {took * 1000:7.0f} ms  {took / base:.2f}x")
        checks._openat2_ok = None

        def select_and_stage() -> None:
            dest = Path(tempfile.mkdtemp(dir=tmp)) / "staged"
            stage(select_files(root), dest)
            shutil.rmtree(dest.parent)

        print(f"  select_files + stage (git checkout):      {best(select_and_stage) * 1000:7.0f} ms")


if __name__ == "__main__":
    main()
