"""How well `find_code` finds the code a fix touches, against plain grep ranking by match count.

For every task under tasks/ that ships a gold.patch, the query is the task's problem.md and the
relevant items are what the gold patch touches: the files (file level) and the code chunks whose
line span holds a changed line (chunk level: functions, classes, module sections). Both rankers see
the same files (the ones find_code indexes). Prints recall@1/3/5 and MRR for each.

    .venv/bin/python bench/bench_find_code.py [--tasks tasks] [--k 5]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import unidiff

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.tools.retrieval.chunks import STOP, Chunk, chunk_file  # noqa: E402
from harness.tools.retrieval.code_index import CodeIndex, rank_files  # noqa: E402
from harness.tools.retrieval.find_code import EXTENSIONS, SKIP_DIRS  # noqa: E402


@dataclass
class Case:
    name: str
    query: str
    files: dict[str, str]                 # path -> text
    gold_files: set[str]
    gold_lines: dict[str, set[int]]       # path -> changed line numbers in the original file


def load_cases(root: Path) -> list[Case]:
    cases = []
    for task in sorted(p for p in root.iterdir() if (p / "gold.patch").is_file()):
        repo = task / "repo"
        files = {str(f.relative_to(repo)): f.read_text(errors="replace") for f in sorted(repo.rglob("*"))
                 if f.is_file() and _indexable(f.relative_to(repo))}
        lines: dict[str, set[int]] = {}
        for pf in unidiff.PatchSet((task / "gold.patch").read_text()):
            changed = lines.setdefault(pf.path, set())
            for hunk in pf:
                changed.update(ln.source_line_no for ln in hunk if ln.is_removed)
                if not any(ln.is_removed for ln in hunk):
                    changed.add(max(1, hunk.source_start + hunk.source_length // 2))
        cases.append(Case(task.name, (task / "problem.md").read_text(), files, set(lines), lines))
    return cases


def _indexable(rel: Path) -> bool:
    skip = any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1])
    return not skip and rel.suffix.lstrip(".") in EXTENSIONS


def words(query: str) -> list[str]:
    """What a person would grep for: the words of the statement, 3+ letters, no stop words."""
    return sorted({w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", query)} - STOP)


def grep_count(text: str, query_words: list[str]) -> int:
    low = text.lower()
    return sum(low.count(w) for w in query_words)


def rankings(case: Case) -> dict[str, tuple[list[str], list[Chunk]]]:
    index = CodeIndex()
    for path, text in case.files.items():
        index.add_file(path, "-", text)
    hits = index.search(case.query, 10_000)
    chunks = [c for c, _ in hits]
    qw = words(case.query)
    all_chunks = [c for path, text in case.files.items() for c in chunk_file(path, text)]
    by_chunk = sorted((c for c in all_chunks if grep_count(c.text, qw)),
                      key=lambda c: (-grep_count(c.text, qw), c.path, c.start))
    by_file = sorted((p for p, t in case.files.items() if grep_count(t, qw)),
                     key=lambda p: (-grep_count(case.files[p], qw), p))
    return {"find_code": (rank_files(hits), chunks), "grep-count": (by_file, by_chunk)}


def relevant(chunk: Chunk, case: Case) -> bool:
    return any(chunk.start <= n <= chunk.end for n in case.gold_lines.get(chunk.path, ()))


def metrics(ranked: list[bool], n_relevant: int, ks: tuple[int, ...]) -> dict[str, float]:
    out = {f"R@{k}": sum(ranked[:k]) / n_relevant if n_relevant else 0.0 for k in ks}
    first = next((i for i, ok in enumerate(ranked, 1) if ok), None)
    out["MRR"] = 1.0 / first if first else 0.0
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=Path, default=Path(__file__).resolve().parent.parent / "tasks")
    args = parser.parse_args()
    cases = load_cases(args.tasks)
    ks = (1, 3, 5)
    totals: dict[tuple[str, str], list[dict[str, float]]] = {}
    print(f"{len(cases)} tasks with a gold patch under {args.tasks}\n")
    print(f"{'task':<14}{'files':>6}{'gold':>5}  {'ranker':<11}{'file R@5':>9}{'file RR':>8}"
          f"{'chunk R@5':>10}{'chunk RR':>9}")
    for case in cases:
        gold_chunks = {(c.path, c.start) for p, t in case.files.items() for c in chunk_file(p, t) if relevant(c, case)}
        for ranker, (files, chunks) in rankings(case).items():
            fm = metrics([f in case.gold_files for f in files], len(case.gold_files), ks)
            cm = metrics([relevant(c, case) for c in chunks], len(gold_chunks), ks)
            totals.setdefault((ranker, "file"), []).append(fm)
            totals.setdefault((ranker, "chunk"), []).append(cm)
            print(f"{case.name:<14}{len(case.files):>6}{len(case.gold_files):>5}  {ranker:<11}"
                  f"{fm['R@5']:>9.2f}{fm['MRR']:>8.2f}{cm['R@5']:>10.2f}{cm['MRR']:>9.2f}")
    print("\nmean over tasks:")
    for (ranker, level), rows in sorted(totals.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        mean = {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}
        print(f"  {level:<6}{ranker:<11}" + "  ".join(f"{key} {value:.3f}" for key, value in mean.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
