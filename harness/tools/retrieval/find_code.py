"""`find_code`: ranked retrieval over the project's code chunks, kept in step with the files.

The index lives in `ToolContext.code_index`. Before each query one command in the
sandbox lists the SHA-256 of every indexable file; files that are new or changed are fetched in
one tar archive and re-indexed, files that are gone are dropped. The first query builds the index.
The ranking (`hybrid.py`) fuses BM25 and the dense retriever (`dense.py`) by reciprocal rank fusion;
while the dense half is not ready (being built in the background), BM25 answers alone and says so.
"""

from __future__ import annotations

import io
import shlex
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from harness.config import ToolsConfig
from harness.errors import ToolError
from harness.tools.base import Effect, Tool, ToolContext
from harness.tools.retrieval import embedding
from harness.tools.retrieval.chunks import Chunk
from harness.tools.retrieval.code_index import CodeIndex, SyncReport
from harness.tools.retrieval.dense import DenseIndex
from harness.tools.retrieval.hybrid import Fusion, Stages, rank
from harness.tools.retrieval.prewarm import start_warming
from sandbox.api import STATE_DIR, WORKDIR, Sandbox

MAX_FILE_BYTES = 512 * 1024
EXTENSIONS = ("py", "pyi", "md", "rst", "txt", "cfg", "toml", "ini", "yaml", "yml", "json", "js", "ts",
              "jsx", "tsx", "c", "h", "cc", "cpp", "hpp", "go", "rs", "java", "rb", "sh", "sql", "html", "css")
SKIP_DIRS = (".git", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache", "*.egg-info")

DESCRIPTION = """\
Find the code most related to a description, e.g. the words of a bug report ("top words returns \
one word too few"): a ranked list of functions, classes and file sections with file and line \
span. Good as a first step when you do not know where something lives; use `search` for an exact \
name or text. `k`: how many results (default {k})."""


def find_code_tool(config: ToolsConfig) -> Tool:
    params = {"type": "object",
              "properties": {
                  "query": {"type": "string", "minLength": 1, "description": "What the code does, in words."},
                  "k": {"type": "integer", "minimum": 1, "maximum": 30, "description": "Number of results."}},
              "required": ["query"], "additionalProperties": False}

    def run(ctx: ToolContext, query: str, k: int | None = None) -> str:
        return _find(ctx, query, k or config.find_code_k, config)

    return Tool("find_code", DESCRIPTION.format(k=config.find_code_k), params, Effect.READ, run,
                example={"query": "count words in a text, case insensitive", "k": 5})


def warm_index(index: CodeIndex, root: Path | None, config: ToolsConfig | None = None) -> None:
    """Start analysing `root` (the host's copy of what /workspace holds, or is about to hold) for the
    first query of the session `index` serves (`ToolContext.code_index`), then embedding it for the
    dense half if `config` has it on and it can run here."""
    attach_dense(index, config or ToolsConfig())
    start_warming(index, root, EXTENSIONS, SKIP_DIRS)


def attach_dense(index: CodeIndex, config: ToolsConfig) -> str | None:
    """Give `index` its dense half if `config` wants it; returns why it has none (None: it has one, or
    it is switched off)."""
    if not config.find_code_dense:
        return None
    why = embedding.unavailable()
    if why is None and index.dense is None:
        index.dense = DenseIndex(cache=index.cache, stop=index.stop_warming)   # the session's end stops it
    return why


def _find(ctx: ToolContext, query: str, k: int, config: ToolsConfig) -> str:
    ctx.code_index.answering.set()       # the dense build's own work in this process waits meanwhile
    try:
        return _answer(ctx, query, k, config)
    finally:
        ctx.code_index.answering.clear()


def _answer(ctx: ToolContext, query: str, k: int, config: ToolsConfig) -> str:
    index = ctx.code_index
    report = index.sync(fingerprints(ctx.sandbox), lambda paths: fetch(ctx.sandbox, paths))
    if not index.chunks:
        return "the project has no text files to index (looked for source and text files under 512 KB)"
    why = attach_dense(index, config)
    dense = index.dense if config.find_code_dense and isinstance(index.dense, DenseIndex) else None
    if dense is not None:
        why = dense.prepare(index, index.fetched, lambda paths: fetch(ctx.sandbox, paths))
        dense = None if why else dense
    index.fetched = {}
    stages = Stages(bm25=config.find_code_bm25 or dense is None, dense=dense is not None,
                    rerank=config.find_code_rerank, rrf_c=config.find_code_rrf_c,
                    fusion=cast(Fusion, config.find_code_fusion))
    hits = rank(index, dense, query, k, stages, lambda chunks: _texts(ctx, chunks))
    used = " + ".join(name for name, on in (("BM25", stages.bm25), ("dense", stages.dense)) if on)
    stats = f"{used}; index: {len(index.chunks)} chunks in {len(index.files)} files{_sync_note(report)}"
    if why:
        stats += f"; BM25 alone: {why}"
    if not hits:
        return f"no code matches any word of {query!r} ({stats}); try other words, or search(pattern=...)"
    out = [f"{len(hits)} best matches for {query!r} ({stats}):"]
    for n, hit in enumerate(hits, 1):
        chunk = hit.chunk
        out.append(f"{n}. {chunk.path}:{chunk.start}-{chunk.end}  {chunk.label}  "
                   f"({_score(hit.score, stages)}; found by {', '.join(hit.found_by)})\n     {chunk.text}")
    return "\n".join(out)


def _score(score: float, stages: Stages) -> str:
    if (stages.bm25 and stages.dense) or stages.rerank:
        return f"rrf {score:.4f}"
    return f"score {score:.1f}" if stages.bm25 else f"cosine {score:.2f}"


def _texts(ctx: ToolContext, chunks: list[Chunk]) -> list[str]:
    """The whole text of each chunk, from the sandbox (for the re-read)."""
    files = fetch(ctx.sandbox, sorted({c.path for c in chunks}))
    return ["\n".join(files.get(c.path, "").split("\n")[c.start - 1:c.end]) for c in chunks]


def _sync_note(report: SyncReport) -> str:
    parts = [f"{n} {what}" for n, what in ((report.added, "new"), (report.changed, "changed"),
                                           (report.removed, "removed")) if n]
    return f"; re-indexed files: {', '.join(parts)}" if parts else ""


def fingerprints(sandbox: Sandbox) -> dict[str, str]:
    """path (relative to the workspace) -> sha256 of every indexable file, from one command."""
    prune = " -o ".join(f"-name {shlex.quote(d)}" for d in SKIP_DIRS)
    names = " -o ".join(f"-name '*.{e}'" for e in EXTENSIONS)
    listing = f"{STATE_DIR}/index-fingerprints.txt"
    res = sandbox.exec(f"mkdir -p {STATE_DIR} && cd {WORKDIR} && find . \\( {prune} \\) -prune -o -type f "
                       f"-size -{MAX_FILE_BYTES // 1024}k \\( {names} \\) -print0 | xargs -0 -r sha256sum "
                       f"> {listing}", timeout=60, save_output=False)
    if not res.ok:
        raise ToolError(f"find_code could not list the project's files (exit {res.exit_code}): "
                        f"{res.stderr.text.strip()[:300]}")
    out: dict[str, str] = {}
    for line in sandbox.read_file(listing).data.decode("utf-8", "replace").splitlines():
        sha, _, path = line.partition("  ")
        if len(sha) == 64 and path.startswith("./"):
            out[path[2:]] = sha
    return out


def fetch(sandbox: Sandbox, paths: list[str]) -> Mapping[str, str]:
    """The texts of `paths` (relative to the workspace), fetched in one tar archive."""
    listing, archive = f"{STATE_DIR}/index-fetch.list", f"{STATE_DIR}/index-fetch.tar"
    sandbox.write_file(listing, "\0".join(paths).encode())
    res = sandbox.exec(f"cd {WORKDIR} && tar -cf {archive} --null --ignore-failed-read -T {listing}",
                       timeout=120, save_output=False)
    if res.exit_code not in (0, 1):
        raise ToolError(f"find_code could not read the changed files (tar exit {res.exit_code}): "
                        f"{res.stderr.text.strip()[:300]}")
    data = sandbox.read_file(archive).data
    sandbox.exec(f"rm -f {archive} {listing}", timeout=10, save_output=False)
    texts: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                texts[member.name] = handle.read().decode("utf-8", "replace")
    return texts
