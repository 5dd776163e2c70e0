"""Other fusions of `find_code`'s two lists, measured from the lists `bench_find_code.py --lists` saved.

No tree and no model is needed: each saved row holds BM25's list (its best `hybrid.DEEP` chunks), the
dense list (its best `hybrid.POOL`), the spans of those chunks and the gold patch's files and lines,
so a fusion is measured on 28 rows in a second. The figures are the same as `bench_find_code.py`
prints for the same fusion (the same functions compute them).

    .venv/bin/python bench/bench_find_code_fusions.py LISTS.jsonl [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_find_code import DEPTH, VARIANTS, Case, chunk_metrics, file_metrics, print_tables, summarise  # noqa: E402

from harness.tools.retrieval.chunks import Chunk  # noqa: E402
from harness.tools.retrieval.code_index import rank_files  # noqa: E402
from harness.tools.retrieval.hybrid import POOL, Stages, fuse  # noqa: E402

RANKERS = ("bm25", "dense", "hybrid", *VARIANTS)


class Spans:
    """What a fusion reads of an index: its chunks by id."""

    def __init__(self, chunks: dict[int, Chunk]) -> None:
        self.chunks = chunks


def measure(row: dict[str, Any]) -> dict[str, tuple[list[str], list[Chunk]]]:
    spans = Spans({int(cid): Chunk(p, start, end, kind, name, "")
                   for cid, (p, start, end, kind, name) in row["chunks"].items()})
    lists = {name: [(int(cid), float(score)) for cid, score in found] for name, found in row["lists"].items()}
    orders = {"bm25": lists["bm25"][:DEPTH], "dense": lists["dense"][:POOL]}
    for name, stage in {"hybrid": Stages(), **VARIANTS}.items():
        orders[name] = fuse(spans, lists, stage)[:DEPTH]       # type: ignore[arg-type]
    out = {}
    for name, ranked in orders.items():
        chunks = [spans.chunks[cid] for cid, _ in ranked]
        out[name] = (rank_files((c, 0.0) for c in chunks), chunks)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lists", type=Path)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results: dict[str, dict[str, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    per_repo: dict[str, Any] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for line in args.lists.read_text().splitlines():
        row = json.loads(line)
        case = Case(row["instance"], row["repo"], "", {}, set(row["gold_files"]),
                    {p: set(n) for p, n in row["gold_lines"].items()})
        for name, (files, chunks) in measure(row).items():
            fm, cm = file_metrics(files, case.gold_files), chunk_metrics(chunks, case, row["gold_chunks"] or 1)
            for into in (results, per_repo[case.repo]):
                into["file"][name].append(fm)
                into["chunk"][name].append(cm)
    report = summarise(results, per_repo, {"instances": [], "query_seconds": {}}, RANKERS)
    print_tables(report, RANKERS)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
