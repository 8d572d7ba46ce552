"""GatewayService: validates requests and hands them to the Pipeline."""
from __future__ import annotations

import grpc

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.errors import InvalidArgument, abort_invalid_argument, validate_query, validate_range
from services.gateway import deep
from services.gateway.config import GatewaySettings
from services.gateway.entity_search import EntitySearch
from services.gateway.pipeline import Deadline, Pipeline

MAX_TOP_K = 100
# Stages a request may switch off (ablations); retriever channels too.
SWITCHABLE_STAGES = frozenset({
    "graph", "expansion", "mmr", "rerank", "pg.vector", "pg.hyde", "pg.keyword", "pg.fulltext", "pg.trigram", "pg.boost",
    "graph.heading", "graph.fulltext", "graph.neighbour",
})


class GatewayServicer(gateway_pb2_grpc.GatewayServiceServicer):
    def __init__(self, settings: GatewaySettings, pipeline: Pipeline) -> None:
        self._settings = settings
        self._pipeline = pipeline
        self._entities = EntitySearch(pipeline)

    def _deadline(self, context: grpc.aio.ServicerContext) -> Deadline:
        left = context.time_remaining()
        return Deadline(self._settings.default_deadline if left is None else left)

    def _validate(self, query: str, top_k: int) -> tuple[str, int]:
        return validate_query(query, self._settings.max_query_chars), validate_range(top_k or 10, 1, MAX_TOP_K, "top_k")

    async def Search(self, request: gateway_pb2.SearchRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.SearchResponse:
        query, top_k = self._validate(request.query, request.top_k)
        unknown = sorted(set(request.disabled_stages) - SWITCHABLE_STAGES)
        if unknown:
            raise InvalidArgument("disabled_stages", f"unknown stage {unknown[0]!r}; known: {', '.join(sorted(SWITCHABLE_STAGES))}")
        rerank = request.rerank if request.HasField("rerank") else None
        outcome = await self._pipeline.search(query, top_k, rerank, self._deadline(context), frozenset(request.disabled_stages))
        return outcome.response

    async def Answer(self, request: gateway_pb2.AnswerRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.AnswerResponse:
        query, top_k = self._validate(request.query, request.top_k)
        rerank = request.rerank if request.HasField("rerank") else None
        return await self._pipeline.answer(query, top_k, rerank, self._deadline(context))

    async def AnswerStream(self, request: gateway_pb2.AnswerStreamRequest, context: grpc.aio.ServicerContext):
        try:
            query, top_k = self._validate(request.query, request.top_k)
        except InvalidArgument as err:  # the error interceptor handles unary RPCs only
            await abort_invalid_argument(context, err.field, err.description)
        rerank = request.rerank if request.HasField("rerank") else None
        async for event in self._pipeline.answer_flow.answer_events(query, top_k, rerank, self._deadline(context)):
            yield event

    async def DeepSearch(self, request: gateway_pb2.DeepSearchRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.DeepSearchResponse:
        query, top_k = self._validate(request.query, request.top_k)
        iterations = validate_range(request.max_iterations or deep.DEFAULT_MAX_ITERATIONS, 1, 5, "max_iterations")
        sub_queries = validate_range(request.sub_queries or deep.DEFAULT_SUB_QUERIES, 1, 5, "sub_queries")
        threshold = request.growth_threshold or deep.DEFAULT_GROWTH_THRESHOLD
        if not 0.0 <= threshold <= 1.0:
            raise InvalidArgument("growth_threshold", "must be between 0 and 1")
        return await self._pipeline.answer_flow.deep_search(query, top_k, iterations, sub_queries, threshold, self._deadline(context))

    async def Ingest(self, request: gateway_pb2.IngestRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.IngestResponse:
        if not request.jsonl.strip():
            raise InvalidArgument("jsonl", "must hold at least one JSON record")
        if request.kind not in gateway_pb2.IngestKind.values():
            raise InvalidArgument("kind", f"unknown ingest kind {request.kind}; known: {', '.join(gateway_pb2.IngestKind.keys())}")
        if request.kind in (gateway_pb2.INGEST_KIND_ENTITIES, gateway_pb2.INGEST_KIND_TRIPLES):
            response, parse_failures = await self._entities.ingest(request.jsonl, request.kind, self._deadline(context))
        else:
            response, parse_failures = await self._pipeline.ingest(request.jsonl, self._deadline(context))
        if response.received and len(parse_failures) == response.received:
            first = parse_failures[0]
            field = f"jsonl[{first.index}]" + (f".{first.field}" if first.field else "")
            raise InvalidArgument(field, first.reason + ("" if len(parse_failures) == 1 else f" (and {len(parse_failures) - 1} more records)"))
        return response

    async def SearchEntities(self, request: gateway_pb2.SearchEntitiesRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.SearchEntitiesResponse:
        query, top_k = self._validate(request.query, request.top_k)
        return await self._entities.search(query, top_k, self._deadline(context))
