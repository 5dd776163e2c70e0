"""How well `find_code` localizes real SWE-bench fixes: grep, BM25, dense, hybrid (RRF), hybrid + re-read.

For each SWE-bench row (default: the shared Lite test and dev rows) whose source is in `--repos DIR`
(`<instance_id>.tar.gz`, or a git clone `<owner>__<name>` holding the base commit, as
`harness eval --repos` takes), the whole repository at the base commit is indexed as `find_code`
indexes it (the same files and chunks), the query is the problem statement, and the relevant items
are what the gold patch touches: the files it modifies (file level) and the chunks whose line span
holds a changed line (chunk level). A file ranking is the order in which files first appear in the
chunk ranking. Printed per repository and overall: file-level recall@1/5/10, MRR and nDCG@10,
chunk-level recall@5/10 and MRR; the cost (embedding, first answer cold and warm, memory). `hybrid`
is the default fusion (`hybrid.Stages()`); the other fusions (`VARIANTS`) are measured beside it from
the same two retrieved lists, and `--lists` saves those lists for `bench_find_code_fusions.py`.

    .venv/bin/python bench/bench_find_code.py [--instances FILE ...] [--repos DIR] [--per-repo 7]
        [--repo sympy/sympy ...] [--json OUT.json] [--cache PATH] [--rrf-c 10 100] [--lists OUT.jsonl]

Embeddings go to the machine's cache (or `--cache`): a second run embeds nothing it has seen.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import unidiff

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from swebench_data import swebench_path  # noqa: E402

from harness.tools.retrieval.chunk_cache import ChunkCache, shared_cache  # noqa: E402
from harness.tools.retrieval.chunks import STOP, Chunk  # noqa: E402
from harness.tools.retrieval.code_index import CodeIndex, rank_files  # noqa: E402
from harness.tools.retrieval.dense import DenseIndex  # noqa: E402
from harness.tools.retrieval.find_code import EXTENSIONS, SKIP_DIRS  # noqa: E402
from harness.tools.retrieval.hybrid import Stages, hits_of, rank, retrieve  # noqa: E402
from harness.tools.retrieval.prewarm import indexable  # noqa: E402

RANKERS = ("grep", "bm25", "dense", "hybrid", "hybrid+rerank")
FILE_METRICS = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10")
CHUNK_METRICS = ("recall@5", "recall@10", "mrr")
DEPTH = 100          # chunks each ranker returns for the metrics
# the fusions measured beside the default one (`hybrid`), all from the same two retrieved lists (c = 60
# unless named; w: the dense list's weight; in: its weight within a file)
VARIANTS = {name: Stages(fusion=fusion, rrf_c=c, dense_weight=w, per_file=per_file, inside_dense=inside)
            for name, fusion, c, w, per_file, inside in (
                ("rrf chunk", "chunk", 60, 1.0, 0, 0.0), ("rrf chunk w=.5", "chunk", 60, 0.5, 0, 0.0),
                ("rrf chunk w=.25", "chunk", 60, 0.25, 0, 0.0), ("rrf chunk c=20", "chunk", 20, 1.0, 0, 0.0),
                ("file all", "file", 60, 1.0, 0, 0.0), ("file 1", "file", 60, 1.0, 1, 0.0),
                ("file 2", "file", 60, 1.0, 2, 0.0), ("file 3", "file", 60, 1.0, 3, 0.0),
                ("file all w=.5", "file", 60, 0.5, 0, 0.0), ("file 1 w=.5", "file", 60, 0.5, 1, 0.0),
                ("slots", "slots", 60, 1.0, 0, 0.0), ("slots w=.5", "slots", 60, 0.5, 0, 0.0),
                ("slots c=20", "slots", 20, 1.0, 0, 0.0), ("slots c=10", "slots", 10, 1.0, 0, 0.0),
                ("slots w=.25", "slots", 60, 0.25, 0, 0.0), ("slots in=.5", "slots", 60, 1.0, 0, 0.5),
                ("slots in=1", "slots", 60, 1.0, 0, 1.0), ("slots w=.5 in=.5", "slots", 60, 0.5, 0, 0.5),
                ("slots w=.5 in=.25", "slots", 60, 0.5, 0, 0.25))}


@dataclass
class Case:
    iid: str
    repo: str
    query: str
    files: dict[str, str]                 # path -> text
    gold_files: set[str]
    gold_lines: dict[str, set[int]]       # path -> changed lines of the original file


def load_rows(paths: list[Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]


def source(row: dict[str, Any], repos: Path, into: Path) -> Path | None:
    """The tree of `row` at its base commit under `into`, from a tarball or a clone; None if neither."""
    tarball = repos / f"{row['instance_id']}.tar.gz"
    if tarball.is_file():
        with tarfile.open(tarball) as tar:
            tar.extractall(into, filter="data")
        return next(p for p in into.iterdir() if p.is_dir())
    git_dir = repos / row["repo"].replace("/", "__") / ".git"
    if not git_dir.exists():
        return None
    archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "--format=tar", row["base_commit"]],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        return None
    tree = into / row["instance_id"]
    tree.mkdir()
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def has_source(row: dict[str, Any], repos: Path) -> bool:
    if (repos / f"{row['instance_id']}.tar.gz").is_file():
        return True
    git_dir = repos / row["repo"].replace("/", "__") / ".git"
    return git_dir.exists() and subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "-e", f"{row['base_commit']}^{{commit}}"],
        capture_output=True, check=False).returncode == 0


def make_case(row: dict[str, Any], tree: Path) -> Case:
    files = {str(p.relative_to(tree)): p.read_bytes().decode("utf-8", "replace")
             for p in indexable(tree, EXTENSIONS, SKIP_DIRS)}
    lines: dict[str, set[int]] = {}
    for pf in unidiff.PatchSet(row["patch"]):
        if pf.is_added_file or pf.path not in files:
            continue
        changed = lines.setdefault(pf.path, set())
        for hunk in pf:
            changed.update(ln.source_line_no for ln in hunk if ln.is_removed and ln.source_line_no)
            if not any(ln.is_removed for ln in hunk):
                changed.add(max(1, hunk.source_start + hunk.source_length // 2))
    return Case(row["instance_id"], row["repo"], row["problem_statement"], files, set(lines), lines)


def words(query: str) -> list[str]:
    """What a person would grep for: the words of the statement, 3+ letters, no stop words."""
    return sorted({w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", query)} - STOP)


def grep_rank(case: Case, index: CodeIndex) -> list[Chunk]:
    """Chunks ranked by how often the statement's words occur in their file, then in their first line."""
    qw = words(case.query)
    count = {p: sum(t.lower().count(w) for w in qw) for p, t in case.files.items()}
    files = sorted((p for p in count if count[p]), key=lambda p: (-count[p], p))
    by_file: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in index.chunks.values():
        by_file[chunk.path].append(chunk)
    return [c for p in files for c in sorted(by_file[p], key=lambda c: c.start)][:DEPTH]


def relevant(chunk: Chunk, case: Case) -> bool:
    return any(chunk.start <= n <= chunk.end for n in case.gold_lines.get(chunk.path, ()))


def file_metrics(files: list[str], gold: set[str]) -> dict[str, float]:
    hits = [f in gold for f in files]
    out = {f"recall@{k}": sum(hits[:k]) / len(gold) for k in (1, 5, 10)}
    first = next((i for i, ok in enumerate(hits, 1) if ok), None)
    out["mrr"] = 1.0 / first if first else 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, ok in enumerate(hits[:10], 1) if ok)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(10, len(gold)) + 1))
    out["ndcg@10"] = dcg / ideal
    return out


def chunk_metrics(chunks: list[Chunk], case: Case, n_gold: int) -> dict[str, float]:
    hits = [relevant(c, case) for c in chunks]
    out = {f"recall@{k}": min(1.0, sum(hits[:k]) / n_gold) for k in (5, 10)}
    first = next((i for i, ok in enumerate(hits, 1) if ok), None)
    out["mrr"] = 1.0 / first if first else 0.0
    return out


def texts_of(case: Case) -> Any:
    def texts(chunks: list[Chunk]) -> list[str]:
        return ["\n".join(case.files[c.path].split("\n")[c.start - 1:c.end]) for c in chunks]
    return texts


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(case: Case, cache: ChunkCache, cost: dict[str, Any], more_c: tuple[int, ...] = (),
             lists_out: Path | None = None) -> dict[str, tuple[list[str], list[Chunk]]]:
    index = CodeIndex(cache=cache)
    fps = {p: hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for p, t in case.files.items()}
    started = time.perf_counter()
    index.sync(fps, lambda paths: {p: case.files[p] for p in paths})
    analysed = time.perf_counter() - started
    dense = DenseIndex(cache=cache)
    started = time.perf_counter()
    before = dense.missing(index)
    dense.build(index, case.files)
    embedding = time.perf_counter() - started
    cost["instances"].append({"instance": case.iid, "chunks": len(index.chunks), "files": len(index.files),
                              "embedded": dense.embedded, "embed_seconds": round(embedding, 2),
                              "analyse_seconds": round(analysed, 2), "missing_before": len(before)})
    out: dict[str, tuple[list[str], list[Chunk]]] = {}
    grep = grep_rank(case, index)
    out["grep"] = (rank_files((c, 0.0) for c in grep), grep)
    stages = {"bm25": Stages(dense=False), "dense": Stages(bm25=False), "hybrid": Stages(),
              "hybrid+rerank": Stages(rerank=True), **VARIANTS, **{f"hybrid c={c}": Stages(rrf_c=c) for c in more_c}}
    lists: dict[str, list[tuple[int, float]]] = {}
    retrieved = 0.0
    for name, stage in stages.items():      # the fusions after the dense ranker (it loads the model)
        if stage.bm25 and stage.dense and not lists:
            started = time.perf_counter()
            lists = retrieve(index, dense, case.query, DEPTH, Stages(fusion="file"))     # the deepest lists
            retrieved = time.perf_counter() - started
        started = time.perf_counter()
        if stage.bm25 and stage.dense:      # a fusion: of the lists retrieved once
            hits = hits_of(index, case.query, lists, DEPTH, stage, texts_of(case))
            cost["query_seconds"][name].append(time.perf_counter() - started + retrieved)
        else:
            hits = rank(index, dense if stage.dense else None, case.query, DEPTH, stage, texts_of(case))
            cost["query_seconds"][name].append(time.perf_counter() - started)
        chunks = [h.chunk for h in hits]
        out[name] = (rank_files((c, 0.0) for c in chunks), chunks)
    if case.repo == "django/django" and "django" not in cost:
        cost["django"] = django_cost(case, index, dense)
    cost["instances"][-1]["gold_chunks"] = sum(1 for c in index.chunks.values() if relevant(c, case))
    if lists_out is not None:
        dump_lists(lists_out, case, index, lists, cost["instances"][-1]["gold_chunks"])
    return out


def dump_lists(path: Path, case: Case, index: CodeIndex, lists: dict[str, list[tuple[int, float]]],
               gold_chunks: int) -> None:
    """One JSON line: the two retrieved lists of `case` and what a fusion and the metrics need of them
    (`bench_find_code_fusions.py` measures other fusions from these without the trees or the model)."""
    ids = {cid for found in lists.values() for cid, _ in found}
    chunks = {cid: [index.chunks[cid].path, index.chunks[cid].start, index.chunks[cid].end,
                    index.chunks[cid].kind, index.chunks[cid].name] for cid in ids}
    row = {"instance": case.iid, "repo": case.repo, "gold_files": sorted(case.gold_files),
           "gold_lines": {p: sorted(n) for p, n in case.gold_lines.items()}, "gold_chunks": gold_chunks,
           "lists": lists, "chunks": chunks}
    with path.open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def django_cost(case: Case, index: CodeIndex, dense: DenseIndex, rounds: int = 5) -> dict[str, Any]:
    """The answers on a django tree, in process (no sandbox), medians of `rounds` taken alternately
    (the machine's speed drifts): BM25 alone; the hybrid while the dense half is not ready (what
    `find_code` then does: `prepare`, which starts the build, and BM25's answer); the hybrid once it is
    ready. The postings and the matrix are built once first (the first query's cost, shown apart)."""
    query = case.query
    started = time.perf_counter()
    rank(index, None, query, 5, Stages(dense=False))
    first_bm25 = time.perf_counter() - started
    fresh = DenseIndex()      # holds no vector: the dense half is still to be built
    started = time.perf_counter()
    rank(index, dense, query, 5, Stages())
    first_hybrid = time.perf_counter() - started
    times: dict[str, list[float]] = defaultdict(list)
    note = None
    for _ in range(rounds):
        started = time.perf_counter()
        rank(index, None, query, 5, Stages(dense=False))
        times["bm25"].append(time.perf_counter() - started)
        started = time.perf_counter()
        note = fresh.prepare(index, {}, None)
        rank(index, None, query, 5, Stages(dense=False))
        times["cold"].append(time.perf_counter() - started)
        started = time.perf_counter()
        rank(index, dense, query, 5, Stages())
        times["warm"].append(time.perf_counter() - started)
    median = {k: round(sorted(v)[len(v) // 2], 3) for k, v in times.items()}
    matrix = dense._rows(index)[1]
    return {"instance": case.iid, "chunks": len(index.chunks), "dense_chunks": len(dense.scoped(index)),
            "bm25_first_s": round(first_bm25, 3), "hybrid_first_s": round(first_hybrid, 3),
            "bm25_s": median["bm25"], "hybrid_not_ready_s": median["cold"], "hybrid_ready_s": median["warm"],
            "not_ready_note": note, "vectors_mb": round(len(dense.vectors) * 768 / 2**20, 1),
            "matrix_mb": round(matrix.nbytes / 2**20, 1), "process_max_rss_mb": round(rss_mb(), 1)}


def mean(rows: list[dict[str, float]], keys: tuple[str, ...]) -> dict[str, float]:
    return {k: round(sum(r[k] for r in rows) / len(rows), 3) for k in keys} if rows else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=Path, nargs="*", default=None)
    parser.add_argument("--repos", type=Path, default=None)
    parser.add_argument("--per-repo", type=int, default=7)
    parser.add_argument("--repo", action="append", default=[])
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--rrf-c", type=int, nargs="*", default=[], help="also the hybrid with these c")
    parser.add_argument("--lists", type=Path, default=None,
                        help="append each row's two retrieved lists to this JSON-lines file "
                             "(bench_find_code_fusions.py measures other fusions from it)")
    args = parser.parse_args()
    rankers = RANKERS + tuple(VARIANTS) + tuple(f"hybrid c={c}" for c in args.rrf_c)
    instances = args.instances or [swebench_path("lite-test.jsonl"), swebench_path("lite-dev.jsonl")]
    repos = args.repos or swebench_path("repos")
    taken: dict[str, int] = defaultdict(int)
    rows = []
    for row in load_rows(instances):
        if (args.repo and row["repo"] not in args.repo) or taken[row["repo"]] >= args.per_repo:
            continue
        if has_source(row, repos):
            rows.append(row)
            taken[row["repo"]] += 1
    if args.repo:       # in the order given (a long run then has the first repositories' figures early)
        rows.sort(key=lambda r: args.repo.index(r["repo"]))
    cache = ChunkCache(args.cache) if args.cache else shared_cache()
    cost: dict[str, Any] = {"instances": [], "query_seconds": defaultdict(list)}
    results: dict[str, dict[str, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    per_repo: dict[str, dict[str, dict[str, list[dict[str, float]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    print(f"{len(rows)} instances from {', '.join(map(str, instances))} with sources in {repos}")
    for row in rows:
        with tempfile.TemporaryDirectory(prefix="bench-find-code-") as tmp:
            tree = source(row, repos, Path(tmp))
            if tree is None:
                continue
            case = make_case(row, tree)
        if not case.gold_files:
            print(f"  {case.iid}: the gold patch modifies no indexed file; skipped")
            continue
        ranked = run_case(case, cache, cost, tuple(args.rrf_c), args.lists)
        spent = cost["instances"][-1]
        line = []
        for name, (files, chunks) in ranked.items():
            fm = file_metrics(files, case.gold_files)
            cm = chunk_metrics(chunks, case, spent["gold_chunks"] or 1)
            results["file"][name].append(fm)
            results["chunk"][name].append(cm)
            per_repo[case.repo]["file"][name].append(fm)
            per_repo[case.repo]["chunk"][name].append(cm)
            line.append(f"{name} {fm['recall@5']:.2f}/{fm['mrr']:.2f}/{cm['recall@5']:.2f}")
        print(f"  {case.iid}: {spent['chunks']} chunks, embedded {spent['embedded']} in {spent['embed_seconds']} s; "
              f"file R@5/MRR/chunk R@5: " + ", ".join(line), flush=True)
        if args.json:       # after each instance: a run stopped early keeps its figures
            args.json.write_text(json.dumps(summarise(results, per_repo, cost, rankers), indent=2))
    report = summarise(results, per_repo, cost, rankers)
    print_tables(report, rankers)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def summarise(results: Any, per_repo: Any, cost: dict[str, Any], rankers: tuple[str, ...] = RANKERS) -> dict[str, Any]:
    report: dict[str, Any] = {
        "file": {name: mean(results["file"][name], FILE_METRICS) for name in rankers},
        "chunk": {name: mean(results["chunk"][name], CHUNK_METRICS) for name in rankers},
        "per_repo": {repo: {"instances": len(levels["file"]["bm25"]),
                            "file": {n: mean(levels["file"][n], FILE_METRICS) for n in rankers},
                            "chunk": {n: mean(levels["chunk"][n], CHUNK_METRICS) for n in rankers}}
                     for repo, levels in sorted(per_repo.items())},
        "instances": len(results["file"]["bm25"]),
    }
    queries = {n: round(sorted(v)[len(v) // 2], 3) for n, v in cost["query_seconds"].items()}
    embedded = sum(i["embedded"] for i in cost["instances"])
    seconds = sum(i["embed_seconds"] for i in cost["instances"])
    report["cost"] = {"query_median_s": queries, "embedded_chunks": embedded, "embed_seconds": round(seconds, 1),
                      "chunks_per_second": round(embedded / seconds, 1) if seconds else None,
                      "django": cost.get("django"), "instances": cost["instances"]}
    return report


def print_tables(report: dict[str, Any], rankers: tuple[str, ...] = RANKERS) -> None:
    print(f"\n{report['instances']} instances; file level:")
    print(f"  {'ranker':<17}" + "".join(f"{m:>11}" for m in FILE_METRICS) + "".join(f"{'chunk ' + m:>17}"
                                                                                    for m in CHUNK_METRICS))
    for name in rankers:
        f, c = report["file"][name], report["chunk"][name]
        print(f"  {name:<17}" + "".join(f"{f.get(m, 0):>11.3f}" for m in FILE_METRICS)
              + "".join(f"{c.get(m, 0):>17.3f}" for m in CHUNK_METRICS))
    print("\nper repository (file recall@5 / MRR / chunk recall@5):")
    for repo, levels in report["per_repo"].items():
        print(f"  {repo:<28}{levels['instances']:>3}  " + "  ".join(
            f"{n} {levels['file'][n]['recall@5']:.2f}/{levels['file'][n]['mrr']:.2f}/"
            f"{levels['chunk'][n]['recall@5']:.2f}" for n in rankers))
    print("\ncost:", json.dumps({k: v for k, v in report["cost"].items() if k != "instances"}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
