"""Bi-encoder scorer: cosine of the configured embedder's query and passage
vectors, fetched from the expander's Embed RPC (EMBED_KIND_QUERY for the
query, EMBED_KIND_PASSAGE for passages). Cheap and always available: it uses
the same model that fills pg.vector, so it re-scores rather than adds a new
signal."""
from __future__ import annotations

import numpy as np

from services.common.embed_client import EmbedClient, EmbedUnavailable
from services.reranker.scorer import Prepared, ScorerUnavailable


class BiEncoderScorer:
    """Scores pairs by (cosine + 1) / 2 of unit-normalised embeddings.

    Args:
        expander_addr: "host:port" of the expander.
        timeout: seconds per Embed call.
    """

    name = "bi-encoder"
    padded = False

    def __init__(self, expander_addr: str, timeout: float = 10.0) -> None:
        self.expander_addr = expander_addr
        self.timeout = timeout
        self._client = EmbedClient(expander_addr, timeout)

    @property
    def model(self) -> str:
        return self._client.model or "expander"

    @property
    def device(self) -> str:
        return "remote"

    async def prepare(self, query: str, passages: list[str]) -> Prepared:
        """No cut here (the embedder applies its own window); tokens are characters."""
        return Prepared(query, list(passages), [len(query) + len(p) for p in passages], 0)

    async def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        try:
            return await self._client.embed(texts, query=query)
        except EmbedUnavailable as err:
            raise ScorerUnavailable("backend", str(err)) from err

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        queries = list(dict.fromkeys(q for q, _ in pairs))
        passages = list(dict.fromkeys(p for _, p in pairs))
        q_vecs = await self._embed(queries, query=True)
        p_vecs = await self._embed(passages, query=False)
        q_index = {q: i for i, q in enumerate(queries)}
        p_index = {p: i for i, p in enumerate(passages)}
        cosines = np.einsum("ij,ij->i", q_vecs[[q_index[q] for q, _ in pairs]], p_vecs[[p_index[p] for _, p in pairs]])
        return [float(min(1.0, max(0.0, (c + 1.0) / 2.0))) for c in cosines]

    async def close(self) -> None:
        await self._client.close()
