"""The scorer interface every reranker backend implements."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(slots=True)
class Prepared:
    """One call's pairs, fitted to the scorer's window.

    Attributes:
        query: the query as scored (cut when longer than its share).
        passages: the passages as scored (cut ones: heading line + head).
        tokens: tokens of each (query, passage) pair, the batching budget's
            unit (characters for scorers without a tokenizer).
        truncated: how many passages were cut.
    """

    query: str
    passages: list[str]
    tokens: list[int]
    truncated: int


class ScorerUnavailable(RuntimeError):
    """The scorer cannot score now: its model is not configured
    (``reason`` "no_model") or the service it calls failed ("backend")."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@runtime_checkable
class Scorer(Protocol):
    """Scores (query, passage) pairs; higher is more relevant, in [0, 1].

    Attributes:
        name: "cross-encoder", "bi-encoder" or "llm" (RerankResponse.scorer).
        padded: whether a batch costs longest pair x pairs (padded tensors)
            or the sum of its pairs.
    """

    name: str
    padded: bool

    @property
    def model(self) -> str:
        """Model name or directory reported in RerankResponse.model."""

    @property
    def device(self) -> str:
        """Where scoring runs ("cpu", "cuda:0", "remote")."""

    async def prepare(self, query: str, passages: list[str]) -> Prepared:
        """Fits the query and passages to the window and counts tokens.
        Raises ScorerUnavailable when the model cannot be loaded."""

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        """One score per pair, in order (one batch: called by the batcher).
        Raises ScorerUnavailable when the backend fails."""

    async def close(self) -> None:
        """Releases channels and pools."""
