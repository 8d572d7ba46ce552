"""retriever_pg channels: pgvector similarity and BM25 keyword search, run
concurrently."""
from __future__ import annotations

import asyncio
import time

from graphmesh.common.v1 import types_pb2
from services.common.records import DocumentRecord, Hit, IngestResult
from services.common.retriever import timing
from services.retriever_pg.store import PgStore


class PgBackend:
    """RetrievalBackend over a PgStore."""

    source_by_channel = {
        "pg.vector": types_pb2.SOURCE_DOCUMENT_CHUNK,
        "pg.keyword": types_pb2.SOURCE_FULLTEXT,
    }

    def __init__(self, store: PgStore) -> None:
        self.store = store

    async def _timed(self, stage: str, coro) -> tuple[list[Hit], types_pb2.StageTiming]:
        started = time.perf_counter()
        hits = await coro
        return hits, timing(stage, started)

    async def retrieve(self, query: str, keywords: list[str], embedding: list[float], top_k: int) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        jobs = []
        if embedding:
            jobs.append(self._timed("pg.vector", self.store.vector_search(embedding, top_k)))
        if keywords:
            jobs.append(self._timed("pg.keyword", self.store.keyword_search(keywords, top_k)))
        results = await asyncio.gather(*jobs)
        hits = [h for part, _ in results for h in part]
        return hits, [t for _, t in results]

    async def ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult:
        return await self.store.ingest_documents(docs)

    async def document_hashes(self, ids: list[str]) -> dict[str, str]:
        return await self.store.document_hashes(ids)
