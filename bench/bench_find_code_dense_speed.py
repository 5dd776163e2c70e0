"""What the dense half costs the model: `find_code`'s first answer on a django tree with the hybrid on
against BM25 alone, in real sandboxes, measured alternately; and the time to embed the tree cold.

    .venv/bin/python bench/bench_find_code_dense_speed.py --warm-cache CACHE [--tarball T] [--rounds 2]
        [--embed-cold]

Each session is a fresh sandbox holding the tree and a new session's index with the warm-up started
before the sandbox (as `harness run` does); the first `find_code` is timed from the call to its answer:
  cold      an empty cache: the hybrid must answer as BM25 does (from BM25, saying the dense half is
            still being built) and take no longer
  warm      a copy of CACHE (analyses and vectors of this tree, e.g. bench_find_code.py's --cache after
            a run over django): the query is made once the warm-up's dense build is done (the model's
            first seconds reading the task), then a second query
With --embed-cold, the cold hybrid session then waits for its dense build and prints how long the
tree took to embed from an empty cache, and how many chunks.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from swebench_data import swebench_path  # noqa: E402

from harness.config import ToolsConfig  # noqa: E402
from harness.tools.base import ToolContext  # noqa: E402
from harness.tools.retrieval.chunk_cache import ChunkCache  # noqa: E402
from harness.tools.retrieval.code_index import CodeIndex  # noqa: E402
from harness.tools.retrieval.dense import DenseIndex  # noqa: E402
from harness.tools.retrieval.find_code import find_code_tool, warm_index  # noqa: E402
from sandbox.api import SandboxSpec  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402

QUERIES = ("QuerySet filter with a Q object on a related field", "prefetch related objects of a generic relation")


def session(image: str, tree: Path, cache: ChunkCache, dense: bool, warm: bool,
            embed_cold: bool = False) -> dict[str, object]:
    config = ToolsConfig(find_code_dense=dense)
    spec = SandboxSpec(image=image, session=f"bench-{uuid.uuid4().hex[:8]}", project_dir=tree,
                       labels={"harness.bench": "1"})
    tool = find_code_tool(config)
    index = CodeIndex(cache=cache)
    out: dict[str, object] = {}
    warm_index(index, tree, config)
    try:
        with DockerSandbox(spec) as box:
            ctx = ToolContext(sandbox=box, session=spec.session, code_index=index)
            if warm and dense:
                _wait_for_dense(index)
            started = time.perf_counter()
            answer = str(tool.function(ctx, query=QUERIES[0], k=5))
            out["first"] = time.perf_counter() - started
            out["head"] = answer.split("\n", 1)[0][-160:]
            started = time.perf_counter()
            tool.function(ctx, query=QUERIES[1], k=5)
            out["second"] = time.perf_counter() - started
            if embed_cold and isinstance(index.dense, DenseIndex) and index.dense.building is not None:
                started = time.perf_counter()
                index.dense.building.join()
                out["embed_wait"] = time.perf_counter() - started
                out["embed_seconds"] = index.dense.build_seconds
                out["embedded"] = index.dense.embedded
    finally:
        index.stop_warming.set()
    return out


def _copy(source: Path, into: Path) -> None:
    """A consistent copy of a cache another process may be writing (SQLite's backup, not a file copy)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(into)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def _wait_for_dense(index: CodeIndex) -> None:
    """Until the warm-up's analysis and then its dense build are done (bounded)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        dense = index.dense
        if index.warming is not None and not index.warming.is_alive() and isinstance(dense, DenseIndex) \
                and dense.building is not None and not dense.building.is_alive():
            return
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tarball", type=Path, default=None)
    parser.add_argument("--warm-cache", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--embed-cold", action="store_true")
    args = parser.parse_args()
    tarball = args.tarball or swebench_path("repos") / "django__django-16139.tar.gz"
    image = ensure_image(python="3.11")
    rows: list[tuple[str, dict[str, object]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-dense-") as tmp:
        root = Path(tmp)
        with tarfile.open(tarball) as tar:
            tar.extractall(root / "tree", filter="data")
        tree = next(p for p in (root / "tree").iterdir() if p.is_dir())
        for n in range(args.rounds):          # alternately: the machine's speed drifts
            for dense in (False, True):
                label = "hybrid" if dense else "BM25 alone"
                rows.append((f"cold, {label}", session(image, tree, ChunkCache(root / f"c{n}{dense}.sqlite3"),
                                                       dense, warm=False)))
                copy = root / f"w{n}{dense}.sqlite3"
                _copy(args.warm_cache, copy)
                rows.append((f"warm, {label}", session(image, tree, ChunkCache(copy), dense, warm=True)))
        if args.embed_cold:
            rows.append(("cold, hybrid, then its dense build",
                         session(image, tree, ChunkCache(root / "embed.sqlite3"), True, warm=False, embed_cold=True)))
    for label, got in rows:
        extra = (f"; its dense build took {got['embed_seconds']:.0f} s for {got['embedded']} chunks (done "
                 f"{got['embed_wait']:.0f} s after the second answer)" if "embed_wait" in got else "")
        print(f"{label:<36} first {got['first']:.2f} s, second {got['second']:.2f} s{extra}\n    {got['head']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
