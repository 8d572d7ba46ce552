"""FuserService with RankEntities (services.fuser.entity_rank)."""
from __future__ import annotations

import grpc

from graphmesh.common.v1 import entity_pb2
from graphmesh.fuser.v1 import fuser_pb2
from services.common.entity_convert import relation_name, relation_to_proto
from services.common.errors import InvalidArgument, validate_query, validate_range
from services.fuser import entity_rank
from services.fuser.config import FuserSettings
from services.fuser.servicer import FuserServicer


def to_item(c: entity_pb2.EntityCandidate) -> entity_rank.EntityItem:
    """EntityCandidate -> EntityItem."""
    return entity_rank.EntityItem(
        name=c.name, category=c.category, definition=c.definition, aliases=list(c.aliases), degree=c.degree,
        evidence=[entity_rank.Evidence(e.channel, e.score, e.matched, relation_name(e.relation)) for e in c.evidence],
        relation=relation_name(c.relation),
    )


def to_proto(it: entity_rank.EntityItem) -> entity_pb2.EntityCandidate:
    """EntityItem -> EntityCandidate with score and breakdown."""
    return entity_pb2.EntityCandidate(
        name=it.name, category=it.category, definition=it.definition, aliases=it.aliases[:20], degree=it.degree,
        evidence=[entity_pb2.EntityEvidence(channel=e.channel, score=e.score, matched=e.matched, relation=relation_to_proto(e.relation))
                  for e in it.evidence],
        relation=relation_to_proto(it.relation), score=it.score, score_breakdown=it.breakdown,
    )


class EntityFuserServicer(FuserServicer):
    """Adds RankEntities; weights from FuserSettings.entity_rank."""

    def __init__(self, settings: FuserSettings) -> None:
        super().__init__(settings)
        self._rank_config = entity_rank.RankConfig(**settings.entity_rank)

    async def RankEntities(self, request: fuser_pb2.RankEntitiesRequest, context: grpc.aio.ServicerContext) -> fuser_pb2.RankEntitiesResponse:
        query = validate_query(request.query, self._settings.max_query_chars)
        top_k = validate_range(request.top_k or 10, 1, self._settings.max_top_k, "top_k")
        for name, score in request.rerank_scores.items():
            if not 0.0 <= score <= 1.0:
                raise InvalidArgument(f"rerank_scores[{name}]", "must be in [0, 1]")
        ranked, gated = entity_rank.rank(
            query, [to_item(c) for c in request.candidates],
            normalized_query=request.normalized_query, with_embeddings=request.with_embeddings,
            rerank_scores=dict(request.rerank_scores), route_categories=list(request.route_categories),
            route=request.route, attribute_values=list(request.attribute_values),
            top_k=top_k, cfg=self._rank_config,
        )
        return fuser_pb2.RankEntitiesResponse(entities=[to_proto(it) for it in ranked], gated_out=gated)
