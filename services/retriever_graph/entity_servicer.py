"""RetrieverService of the graph retriever: the shared document RPCs plus
the entity RPCs (IngestEntities, IngestTriples, RetrieveEntities) over the
KnowledgeGraphStore."""
from __future__ import annotations

import time
from typing import Callable

import grpc

from graphmesh.common.v1 import entity_pb2, types_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common.entity_convert import hits_to_candidates
from services.common.errors import InvalidArgument
from services.common.retriever import RetrieverServicer, timing, validate_entity_batch, validate_entity_query
from services.retriever_graph.entity_retrieval import EntityQuery, retrieve_entities
from services.retriever_graph.kg_store import EntityRow, KnowledgeGraphStore

MAX_TRIPLES_PER_CALL = 50_000
MAX_VALUES = 50


class GraphRetrieverServicer(RetrieverServicer):
    """``kg`` returns the KnowledgeGraphStore (created once the driver is open)."""

    def __init__(self, backend, max_query_chars: int, kg: Callable[[], KnowledgeGraphStore], attribute_other_weight: float = 0.3) -> None:
        super().__init__(backend, max_query_chars)
        self._kg = kg
        self._max_query_chars = max_query_chars
        self._attribute_other_weight = attribute_other_weight

    async def IngestEntities(self, request: retriever_pb2.IngestEntitiesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.IngestEntitiesResponse:
        validate_entity_batch(request)
        rows, failures = [], []
        for i, e in enumerate(request.entities):
            if not e.name.strip():
                failures.append(types_pb2.IngestFailure(index=i, reason="name must not be blank"))
                continue
            rows.append(EntityRow(e.name.strip(), e.category.strip(), e.definition, list(e.aliases), list(e.parents), dict(e.attributes)))
        if not rows:
            raise InvalidArgument("entities[0].name", "must not be blank")
        stored, unchanged = await self._kg().ingest_entities(rows)
        return retriever_pb2.IngestEntitiesResponse(stored=stored, unchanged=unchanged, failures=failures)

    async def IngestTriples(self, request: retriever_pb2.IngestTriplesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.IngestTriplesResponse:
        if not request.triples:
            raise InvalidArgument("triples", "must not be empty")
        if len(request.triples) > MAX_TRIPLES_PER_CALL:
            raise InvalidArgument("triples", f"at most {MAX_TRIPLES_PER_CALL} triples per call")
        stored, failures = await self._kg().ingest_triples([(t.subject, t.predicate, t.object) for t in request.triples])
        return retriever_pb2.IngestTriplesResponse(
            stored=stored, failures=[types_pb2.IngestFailure(index=i, id=request.triples[i].subject, reason=r) for i, r in failures]
        )

    async def RetrieveEntities(self, request: retriever_pb2.RetrieveEntitiesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.RetrieveEntitiesResponse:
        query, top_k = validate_entity_query(request, self._max_query_chars)
        if len(request.attribute_values) > MAX_VALUES:
            raise InvalidArgument("attribute_values", f"at most {MAX_VALUES} values")
        q = EntityQuery(query, list(request.resolved_names)[:20], list(request.attribute_values), request.attribute_label,
                        list(request.categories)[:10], top_k)
        hits, timings = await retrieve_entities(self._kg(), q, attribute_other_weight=self._attribute_other_weight)
        summaries = []
        if q.categories:
            started = time.perf_counter()
            summaries = [
                entity_pb2.CategorySummary(
                    category=c.category, members=c.members, top_members=c.top_members,
                    shared_facts=[entity_pb2.SharedFact(predicate=p, value=v, members=n) for p, v, n in c.shared_facts])
                for c in await self._kg().category_summaries(q.categories)
            ]
            timings.append(timing("graph.category_summary", started))
        return retriever_pb2.RetrieveEntitiesResponse(candidates=hits_to_candidates(hits), timings=timings, category_summaries=summaries)
