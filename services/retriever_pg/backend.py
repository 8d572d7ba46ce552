"""retriever_pg channels, run concurrently:

- ``pg.vector``: HNSW cosine search with the query embedding, and with the
  HyDE passage embedding when one is given (MarxSphere V63 dual vector);
- ``pg.keyword``: Okapi BM25 over jieba terms;
- ``pg.fulltext``: tsvector/GIN match ordered by hit count then length;
- ``pg.trigram``: pg_trgm substring / word similarity, only for short
  queries (at most ``short_query_chars``) or queries without keywords;
- ``pg.boost``: same-document neighbours of the top keyword hits when hits
  concentrate in a document (MarxSphere V88A).
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass

from graphmesh.common.v1 import types_pb2
from services.common.records import DocumentRecord, Hit, IngestResult
from services.common.retriever import RetrievalQuery, timing
from services.retriever_pg.store import PgStore


@dataclass(frozen=True, slots=True)
class PgChannelConfig:
    """Channel switches and sizes.

    Attributes:
        fulltext / trigram / boost: whether those channels run by default.
        short_query_chars: queries at most this long (characters) use trigrams.
        boost_window: neighbour distance in chunk ordinals.
        boost_limit: most boosted chunks (reference default 10).
        boost_min_hits: keyword hits in one document that count as concentrated.
    """

    fulltext: bool = True
    trigram: bool = True
    boost: bool = True
    short_query_chars: int = 4
    boost_window: int = 2
    boost_limit: int = 10
    boost_min_hits: int = 2


class PgBackend:
    """RetrievalBackend over a PgStore."""

    source_by_channel = {
        "pg.vector": types_pb2.SOURCE_DOCUMENT_CHUNK,
        "pg.hyde": types_pb2.SOURCE_DOCUMENT_CHUNK,
        "pg.keyword": types_pb2.SOURCE_FULLTEXT,
        "pg.fulltext": types_pb2.SOURCE_FULLTEXT,
        "pg.trigram": types_pb2.SOURCE_FULLTEXT,
        "pg.boost": types_pb2.SOURCE_DOCUMENT_CHUNK,
    }

    def __init__(self, store: PgStore, config: PgChannelConfig | None = None) -> None:
        self.store = store
        self.config = config or PgChannelConfig()

    async def _timed(self, stage: str, coro) -> tuple[str, list[Hit], types_pb2.StageTiming]:
        started = time.perf_counter()
        hits = await coro
        return stage, hits, timing(stage, started)

    async def _hyde(self, embedding: list[float], top_k: int) -> list[Hit]:
        hits = await self.store.vector_search(embedding, top_k)
        for h in hits:
            h.channel, h.evidence = "pg.hyde", "cosine to HyDE passage"
        return hits

    async def retrieve(self, request: RetrievalQuery) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        cfg, k = self.config, request.top_k
        jobs = []
        if request.embedding and request.enabled("pg.vector"):
            jobs.append(self._timed("pg.vector", self.store.vector_search(request.embedding, k)))
        if request.hyde_embedding and request.enabled("pg.hyde"):
            jobs.append(self._timed("pg.hyde", self._hyde(request.hyde_embedding, k)))
        if request.keywords and request.enabled("pg.keyword"):
            jobs.append(self._timed("pg.keyword", self.store.keyword_search(request.keywords, k)))
        if request.keywords and cfg.fulltext and request.enabled("pg.fulltext"):
            jobs.append(self._timed("pg.fulltext", self.store.fulltext_search(request.keywords, k)))
        short = len(request.query) <= cfg.short_query_chars or not request.keywords
        if short and cfg.trigram and request.enabled("pg.trigram"):
            jobs.append(self._timed("pg.trigram", self.store.trigram_search(request.query, k)))
        results = await asyncio.gather(*jobs)
        hits = [h for _, part, _ in results for h in part]
        timings = [t for _, _, t in results]

        keyword_hits = next((part for name, part, _ in results if name == "pg.keyword"), [])
        if cfg.boost and request.enabled("pg.boost") and keyword_hits:
            per_document = Counter(h.document_id for h in keyword_hits)
            seeds = [h.chunk_id for h in keyword_hits if per_document[h.document_id] >= cfg.boost_min_hits]
            if seeds:
                _, boosted, t = await self._timed(
                    "pg.boost", self.store.neighbour_chunks(seeds, cfg.boost_window, cfg.boost_limit)
                )
                hits.extend(boosted)
                timings.append(t)
        return hits, timings

    async def ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult:
        return await self.store.ingest_documents(docs)

    async def document_hashes(self, ids: list[str]) -> dict[str, str]:
        return await self.store.document_hashes(ids)
