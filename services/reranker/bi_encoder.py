"""Bi-encoder scorer: cosine of the configured embedder's query and passage
vectors, fetched from the expander's Embed RPC (EMBED_KIND_QUERY for the
query, EMBED_KIND_PASSAGE for passages). Cheap and always available: it uses
the same model that fills pg.vector, so it re-scores rather than adds a new
signal."""
from __future__ import annotations

import grpc
import numpy as np

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from services.common.clients import channel
from services.reranker.scorer import Prepared, ScorerUnavailable

EMBED_BATCH = 512  # most texts per Embed call (expander.proto)


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
        self._channel: grpc.aio.Channel | None = None
        self._stub: expander_pb2_grpc.ExpanderServiceStub | None = None
        self._model = ""

    @property
    def model(self) -> str:
        return self._model or "expander"

    @property
    def device(self) -> str:
        return "remote"

    def _expander(self) -> expander_pb2_grpc.ExpanderServiceStub:
        if self._stub is None:
            self._channel = channel(self.expander_addr)
            self._stub = expander_pb2_grpc.ExpanderServiceStub(self._channel)
        return self._stub

    async def prepare(self, query: str, passages: list[str]) -> Prepared:
        """No cut here (the embedder applies its own window); tokens are characters."""
        return Prepared(query, list(passages), [len(query) + len(p) for p in passages], 0)

    async def _embed(self, texts: list[str], kind: int) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), EMBED_BATCH):
            try:
                reply = await self._expander().Embed(
                    expander_pb2.EmbedRequest(texts=texts[start:start + EMBED_BATCH], kind=kind), timeout=self.timeout
                )
            except grpc.aio.AioRpcError as err:
                raise ScorerUnavailable("backend", f"expander Embed failed: {err.code().name}: {err.details()}") from err
            self._model = reply.model
            rows.extend(list(v.values) for v in reply.vectors)
        return np.asarray(rows, dtype=np.float32)

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        queries = list(dict.fromkeys(q for q, _ in pairs))
        passages = list(dict.fromkeys(p for _, p in pairs))
        q_vecs = await self._embed(queries, expander_pb2.EMBED_KIND_QUERY)
        p_vecs = await self._embed(passages, expander_pb2.EMBED_KIND_PASSAGE)
        q_index = {q: i for i, q in enumerate(queries)}
        p_index = {p: i for i, p in enumerate(passages)}
        cosines = np.einsum("ij,ij->i", q_vecs[[q_index[q] for q, _ in pairs]], p_vecs[[p_index[p] for _, p in pairs]])
        return [float(min(1.0, max(0.0, (c + 1.0) / 2.0))) for c in cosines]

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None
