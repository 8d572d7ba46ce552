"""Cross-encoder scorer on ONNX Runtime: the model of a CrossEncoder
directory exported once to onnx/model.onnx (services/reranker/onnx_export.py),
tokenized by the directory's own tokenizer.json with the tokenizers library.
It needs neither torch nor sentence-transformers, so the default install
serves a trained cross-encoder; scores match sentence-transformers' to the
difference recorded in onnx/export.json."""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from services.reranker.scorer import Prepared, ScorerUnavailable
from services.reranker.truncation import fit_pairs

log = logging.getLogger("graphmesh.reranker")

#: Where the export lives inside a CrossEncoder directory.
ONNX_DIR = "onnx"
ONNX_FILE = "model.onnx"
EXPORT_CARD = "export.json"


def exported_model(model_dir: str | Path) -> Path | None:
    """``model_dir``/onnx/model.onnx when the directory was exported (its
    export card and the tokenizer.json the ONNX scorer reads are there too),
    else None."""
    onnx_file = Path(model_dir) / ONNX_DIR / ONNX_FILE
    ready = onnx_file.is_file() and (onnx_file.parent / EXPORT_CARD).is_file() and (Path(model_dir) / "tokenizer.json").is_file()
    return onnx_file if ready else None


#: Pairs per forward pass on CPU when not configured: enough to amortise a
#: call, few enough that length-sorted passes pad little.
CPU_FORWARD_BATCH = 16


class OnnxCrossEncoderScorer:
    """Scores pairs with an exported CrossEncoder (its activation on the
    logit, sigmoid for a one-label model: scores in [0, 1]).

    Args:
        model_dir: a CrossEncoder directory holding onnx/model.onnx,
            onnx/export.json and tokenizer.json.
        max_length: tokens per pair, specials included.
        max_query_share: at most this share of max_length for the query.
        forward_batch: pairs per forward pass (0 = CPU_FORWARD_BATCH),
            length-sorted.
        threads: ONNX Runtime intra-op threads (0 = its default, one per core).
    Raises:
        FileNotFoundError: ``model_dir`` is not an exported CrossEncoder directory.
    """

    name = "cross-encoder"
    padded = True

    def __init__(self, model_dir: str, max_length: int = 512, max_query_share: float = 0.5,
                 forward_batch: int = 0, threads: int = 0) -> None:
        onnx_file = exported_model(model_dir)
        if onnx_file is None:
            raise FileNotFoundError(f"{model_dir} holds no ONNX export (graphmesh reranker export-onnx {model_dir})")
        self.model_dir = model_dir
        self.onnx_file = onnx_file
        self.max_length = max_length
        self.max_query_share = max_query_share
        self.forward_batch = forward_batch or CPU_FORWARD_BATCH
        self.threads = threads
        self._lock = threading.Lock()
        self._session = None
        self._tokenizer = None
        self._pair_tokenizer = None
        self._inputs: list[str] = []
        self._sigmoid = True

    @property
    def model(self) -> str:
        return self.model_dir

    @property
    def device(self) -> str:
        return "cpu"

    def load(self):
        """The ONNX Runtime session, created on first call (thread-safe),
        with the tokenizer.

        Raises:
            ScorerUnavailable: the graph or tokenizer cannot be loaded.
        """
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                try:
                    card = json.loads((self.onnx_file.parent / EXPORT_CARD).read_text(encoding="utf-8"))
                    tokenizer_file = str(Path(self.model_dir) / "tokenizer.json")
                    plain = Tokenizer.from_file(tokenizer_file)
                    plain.no_truncation()
                    plain.no_padding()
                    pairs = Tokenizer.from_file(tokenizer_file)
                    pairs.enable_truncation(self.max_length, strategy="longest_first")
                    pairs.no_padding()
                    options = ort.SessionOptions()
                    if self.threads:
                        options.intra_op_num_threads = self.threads
                    options.inter_op_num_threads = 1
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    # idle workers sleep rather than spin: the node is shared (as the embedder's session)
                    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                    session = ort.InferenceSession(str(self.onnx_file), options, providers=["CPUExecutionProvider"])
                except Exception as err:  # noqa: BLE001 - ONNX Runtime and tokenizers raise their own types
                    raise ScorerUnavailable("no_model", f"cannot load the ONNX cross-encoder {self.model_dir}: {err}") from err
                self._sigmoid = card.get("activation", "sigmoid") == "sigmoid"
                self._inputs = [i.name for i in session.get_inputs()]
                self._tokenizer, self._pair_tokenizer = plain, pairs
                self._session = session
                log.info("cross-encoder %s loaded on ONNX Runtime (max_length %d)", self.model_dir, self.max_length)
            return self._session

    def _spans(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        if not texts:
            return []
        self.load()
        return [list(e.offsets) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def prepare_sync(self, query: str, passages: list[str]) -> Prepared:
        """``prepare`` on the calling thread."""
        return fit_pairs(query, passages, self.max_length, self.max_query_share, self._spans)

    async def prepare(self, query: str, passages: list[str]) -> Prepared:
        return await asyncio.to_thread(self.prepare_sync, query, passages)

    def _forward(self, encodings) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        feed = {}
        for name, attribute in (("input_ids", "ids"), ("attention_mask", "attention_mask"), ("token_type_ids", "type_ids")):
            if name in self._inputs:
                array = np.zeros((len(encodings), width), dtype=np.int64)
                for row, e in enumerate(encodings):
                    values = getattr(e, attribute)
                    array[row, :len(values)] = values
                feed[name] = array
        logits = self._session.run(None, feed)[0].reshape(len(encodings), -1)[:, 0]
        return 1.0 / (1.0 + np.exp(-logits)) if self._sigmoid else logits

    def score_sync(self, pairs: list[tuple[str, str]]) -> list[float]:
        """``score`` on the calling thread: forward passes of
        ``forward_batch`` length-sorted pairs."""
        if not pairs:
            return []
        self.load()
        encodings = self._pair_tokenizer.encode_batch([tuple(p) for p in pairs])
        order = sorted(range(len(pairs)), key=lambda i: len(encodings[i].ids))
        scores = np.empty(len(pairs))
        for start in range(0, len(order), self.forward_batch):
            chunk = order[start:start + self.forward_batch]
            scores[chunk] = self._forward([encodings[i] for i in chunk])
        return [float(s) for s in scores]

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        return await asyncio.to_thread(self.score_sync, pairs)

    async def close(self) -> None:
        """Nothing to release: the session lives as long as the process."""
