"""Cross-encoder scorer: a sentence-transformers CrossEncoder from a local
directory (local files only), loaded once, lazily, on first use."""
from __future__ import annotations

import asyncio
import copy
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from services.reranker.scorer import Prepared, ScorerUnavailable
from services.reranker.truncation import fit_pairs

log = logging.getLogger("graphmesh.reranker")


def resolve_device(device: str) -> str:
    """"auto" -> "cuda" when torch sees a GPU, else "cpu"; others unchanged."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class CrossEncoderScorer:
    """Scores pairs with a CrossEncoder (sigmoid output in [0, 1]).

    Args:
        model_dir: directory of a CrossEncoder, or of a Hugging Face BERT
            (a fresh one-label head is then added: useful only for tests).
        device: "auto", "cpu", "cuda" or "cuda:N".
        max_length: tokens per pair, specials included.
        max_query_share: at most this share of max_length for the query.
        fp16: half precision on CUDA.
        forward_batch: pairs per forward pass (0 = 16 on CPU, all on CUDA);
            sentence-transformers sorts the pairs by length first.
    Raises:
        FileNotFoundError: ``model_dir`` is not a directory.
    """

    name = "cross-encoder"
    padded = True

    def __init__(self, model_dir: str, device: str = "auto", max_length: int = 512,
                 max_query_share: float = 0.5, fp16: bool = True, forward_batch: int = 0) -> None:
        if not Path(model_dir).is_dir():
            raise FileNotFoundError(f"cross-encoder directory not found: {model_dir}")
        self.model_dir = model_dir
        self.requested_device = device
        self.max_length = max_length
        self.max_query_share = max_query_share
        self.fp16 = fp16
        self.forward_batch = forward_batch
        self._model = None
        self._lock = threading.Lock()
        self._span_lock = threading.Lock()
        self._span_tokenizer = None
        self._device = ""

    @property
    def model(self) -> str:
        return self.model_dir

    @property
    def device(self) -> str:
        return self._device

    def load(self):
        """The CrossEncoder, loaded on first call (thread-safe).

        Raises:
            ScorerUnavailable: sentence-transformers missing or the directory
                does not hold a loadable model.
        """
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import CrossEncoder
                except ImportError as err:
                    raise ScorerUnavailable("no_model", "the cross-encoder needs the models extra (pip install '.[models]')") from err
                device = resolve_device(self.requested_device)
                try:
                    model = CrossEncoder(self.model_dir, device=device, max_length=self.max_length,
                                         num_labels=1, local_files_only=True)
                except (OSError, ValueError) as err:
                    raise ScorerUnavailable("no_model", f"cannot load {self.model_dir}: {err}") from err
                if device.startswith("cuda") and self.fp16:
                    model.half()
                model.eval()
                self._device = str(model.device)
                self._model = model
                log.info("cross-encoder %s loaded on %s (max_length %d)", self.model_dir, self._device, self.max_length)
            return self._model

    def _spans(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        if not texts:
            return []
        model = self.load()
        with self._span_lock:
            if self._span_tokenizer is None:
                # A fast tokenizer's truncation and padding are settings of one
                # shared Rust object that every call sets: prepare (on request
                # threads) and predict (on the batcher's thread) must not share
                # one, or a batch is padded to another call's length.
                self._span_tokenizer = copy.deepcopy(model.tokenizer)
            enc = self._span_tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True)
        return [list(map(tuple, o)) for o in enc["offset_mapping"]]

    def prepare_sync(self, query: str, passages: list[str]) -> Prepared:
        """``prepare`` on the calling thread."""
        return fit_pairs(query, passages, self.max_length, self.max_query_share, self._spans)

    async def prepare(self, query: str, passages: list[str]) -> Prepared:
        return await asyncio.to_thread(self.prepare_sync, query, passages)

    def score_sync(self, pairs: list[tuple[str, str]]) -> list[float]:
        """``score`` on the calling thread: one forward pass per call."""
        if not pairs:
            return []
        model = self.load()
        per_pass = self.forward_batch or (len(pairs) if self._device.startswith("cuda") else 16)
        scores = model.predict(pairs, batch_size=max(1, per_pass), show_progress_bar=False, convert_to_numpy=True)
        return [float(s) for s in scores]

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        return await asyncio.to_thread(self.score_sync, pairs)

    async def close(self) -> None:
        """Nothing to release: the model lives as long as the process (and
        may serve several services built on this scorer, as in bench/)."""
