"""Cross-encoder scoring, loaded lazily from a local directory."""
from __future__ import annotations

import threading
from pathlib import Path


def resolve_device(device: str) -> str:
    """"auto" -> "cuda" when torch sees a GPU, else "cpu"; others unchanged."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class CrossEncoderScorer:
    """Scores (query, passage) pairs with a sentence-transformers CrossEncoder.

    The model loads on the first ``score`` call, from local files only.
    Raises FileNotFoundError when ``model_dir`` does not exist.
    """

    def __init__(self, model_dir: str, device: str = "auto", batch_size: int = 32, max_length: int = 512) -> None:
        if not Path(model_dir).is_dir():
            raise FileNotFoundError(f"cross-encoder directory not found: {model_dir}")
        self.model_dir = model_dir
        self.requested_device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self._model = None
        self._lock = threading.Lock()
        self.device = ""

    def _load(self):
        with self._lock:
            if self._model is None:
                from sentence_transformers import CrossEncoder

                self.device = resolve_device(self.requested_device)
                self._model = CrossEncoder(
                    self.model_dir, device=self.device, max_length=self.max_length, num_labels=1, local_files_only=True
                )
            return self._model

    def score(self, query: str, passages: list[str]) -> list[float]:
        """One relevance score per passage (higher is better)."""
        if not passages:
            return []
        model = self._load()
        scores = model.predict([(query, p) for p in passages], batch_size=self.batch_size, show_progress_bar=False)
        return [float(s) for s in scores]
