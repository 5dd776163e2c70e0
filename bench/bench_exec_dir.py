"""`harness exec --dir` of `true` on a django-sized project, and where its time goes.

    .venv/bin/python bench/bench_exec_dir.py [--tarball django__django-16139.tar.gz] [--rounds 5]

Three figures, all measured in this run, alternating so that noise falls on each alike:
  cli           `harness exec --dir <tree> -- true` as a user runs it, wall time (goal <= 1.5 s)
  start         `DockerSandbox.start()` with the tree: the project packed on the host while the
                container and its channel start (what the CLI does)
  start, then   the same with the packing after the start (the previous order), in-process
and, for scale, `docker run --rm` of `true` in the same image and the CLI on a one-file project.
Defaults: django__django-16139 from the shared SWE-bench tarballs (6,646 files, 68 MB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from swebench_data import swebench_path  # noqa: E402

from sandbox.api import SandboxSpec  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402

GOAL = 1.5
HARNESS = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "harness"


def _cli(tree: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([str(HARNESS), "exec", "--dir", str(tree), "--", "true"], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"harness exec failed: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def _start(image: str, tree: Path, pack_first: bool) -> float:
    box = DockerSandbox(SandboxSpec(image=image, session=f"bench-{uuid.uuid4().hex[:8]}", project_dir=tree,
                                    labels={"harness.bench": "1"}))
    started = time.perf_counter()
    try:
        if pack_first:
            box.start()
        else:
            box.start_blank()
            box.load_project()
        box.exec("true", timeout=30)
        return time.perf_counter() - started
    finally:
        box.close()


def _docker_run(image: str) -> float:
    started = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tarball", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    image = ensure_image(python="3.11")
    with tempfile.TemporaryDirectory(prefix="bench-exec-") as tmp:
        with tarfile.open(args.tarball or swebench_path("repos/django__django-16139.tar.gz")) as tar:
            tar.extractall(tmp, filter="data")
        tree = next(p for p in Path(tmp).iterdir() if p.is_dir())
        small = Path(tmp) / "small"
        small.mkdir()
        (small / "main.py").write_text("print('hello')\n")
        files = sum(len(names) for _, _, names in os.walk(tree))
        rows: dict[str, list[float]] = {"cli": [], "cli, one-file project": [], "start (packed alongside)": [],
                                        "start, then pack (before)": [], "docker run --rm true": []}
        _cli(small)                                     # warm the image and the caches once
        for _ in range(args.rounds):
            rows["cli"].append(_cli(tree))
            rows["cli, one-file project"].append(_cli(small))
            rows["start (packed alongside)"].append(_start(image, tree, True))
            rows["start, then pack (before)"].append(_start(image, tree, False))
            rows["docker run --rm true"].append(_docker_run(image))
    print(f"harness exec --dir of `true` on {tree.name} ({files:,} files), {args.rounds} rounds, median:")
    medians = {label: statistics.median(values) for label, values in rows.items()}
    for label, value in medians.items():
        print(f"  {label:<28} {value:6.2f} s   (min {min(rows[label]):.2f}, max {max(rows[label]):.2f})")
    ratio = medians["start, then pack (before)"] / medians["start (packed alongside)"]
    print(f"start with the packing alongside: {ratio:.2f}x faster than with it after")
    print(f"cli: {medians['cli']:.2f} s; goal <= {GOAL:g} s: {'met' if medians['cli'] <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
