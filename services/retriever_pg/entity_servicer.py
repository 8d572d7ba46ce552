"""RetrieverService of retriever_pg: the shared document RPCs, the
entity-card RPCs (IngestEntities, RetrieveEntities) and SuggestExpansions.
IngestTriples stays UNIMPLEMENTED: facts live in the graph retriever."""
from __future__ import annotations

import asyncio
import math
import time
from typing import Callable

import grpc

from graphmesh.retriever.v1 import retriever_pb2
from services.common.convert import failures_to_proto
from services.common.entity_convert import hits_to_candidates
from services.common.errors import InvalidArgument
from services.common.retriever import RetrieverServicer, timing, validate_entity_batch, validate_entity_query
from services.retriever_pg.entity_store import EntityCard, EntityCardStore
from services.retriever_pg.expansions import suggest_expansions

MAX_EXPANSION_KEYWORDS = 50


class PgRetrieverServicer(RetrieverServicer):
    """``entities`` returns the EntityCardStore (created once the pool is open)."""

    def __init__(self, backend, max_query_chars: int, entities: Callable[[], EntityCardStore], connect: Callable) -> None:
        super().__init__(backend, max_query_chars)
        self._entities = entities
        self._connect = connect
        self._max_query_chars = max_query_chars

    async def IngestEntities(self, request: retriever_pb2.IngestEntitiesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.IngestEntitiesResponse:
        validate_entity_batch(request)
        cards = [
            EntityCard(
                name=e.name.strip(), category=e.category.strip(), definition=e.definition, aliases=list(e.aliases), parents=list(e.parents),
                surface_embeddings=[list(v.values) for v in request.surface_embeddings[i].surfaces] if request.surface_embeddings else [],
            )
            for i, e in enumerate(request.entities)
        ]
        result = await self._entities().ingest(cards)
        return retriever_pb2.IngestEntitiesResponse(stored=result.stored, unchanged=result.unchanged, failures=failures_to_proto(result.failures))

    async def RetrieveEntities(self, request: retriever_pb2.RetrieveEntitiesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.RetrieveEntitiesResponse:
        query, top_k = validate_entity_query(request, self._max_query_chars)
        store = self._entities()

        async def timed(stage: str, coro):
            started = time.perf_counter()
            hits = await coro
            return hits, timing(stage, started)

        jobs = [timed("pg.entity_keyword", store.keyword_search(query, top_k))]
        if request.query_embedding:
            if len(request.query_embedding) != store.embedding_dim:
                raise InvalidArgument("query_embedding", f"has {len(request.query_embedding)} values, expected {store.embedding_dim}")
            if not all(math.isfinite(v) for v in request.query_embedding) or not any(request.query_embedding):
                raise InvalidArgument("query_embedding", "must be finite and non-zero")
            jobs.append(timed("pg.entity_vector", store.vector_search(list(request.query_embedding), top_k)))
        results = await asyncio.gather(*jobs)
        hits = [h for part, _ in results for h in part]
        return retriever_pb2.RetrieveEntitiesResponse(candidates=hits_to_candidates(hits), timings=[t for _, t in results])

    async def SuggestExpansions(self, request: retriever_pb2.SuggestExpansionsRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.SuggestExpansionsResponse:
        if not request.keywords:
            raise InvalidArgument("keywords", "must not be empty")
        if len(request.keywords) > MAX_EXPANSION_KEYWORDS:
            raise InvalidArgument("keywords", f"at most {MAX_EXPANSION_KEYWORDS} keywords")
        if not 0 <= request.limit <= 50:
            raise InvalidArgument("limit", "must be in 0..50")
        found = await suggest_expansions(self._connect, list(request.keywords), limit=request.limit or 15)
        return retriever_pb2.SuggestExpansionsResponse(expansions=[
            retriever_pb2.QueryExpansion(text=e.text, origin=e.origin, matched=e.matched) for e in found])
