"""SearchEntities: expander.NormalizeEntity (safety gate + route), with the
query embedding alongside -> every entity retriever's RetrieveEntities in
parallel (graph: lookup, full-text, attribute, category, expansion;
PostgreSQL: entity-card keyword and vector channels) -> optional
cross-encoder rerank of the entity cards -> fuser.RankEntities (gate,
weighted score, rerank blend, protections).

A failing expander or fuser degrades the answer: without the expander the
raw query is searched, without the fuser candidates come back in retriever
order (still library entities). The Guizhou design,
the Guizhou indicator GraphRAG design (docs/references.md).
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import grpc

from graphmesh.common.v1 import entity_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.reranker.v1 import reranker_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.gateway.downstream.interfaces import Expander, Fuser, Reranker, Retriever
from services.gateway.config import GatewaySettings
from services.gateway.downstream.guard import Deadline, Trace, guarded
from services.gateway.search.rerank_stage import rerank_detail

ROUTE_NAMES = {
    expander_pb2.ENTITY_ROUTE_LOCAL: "local",
    expander_pb2.ENTITY_ROUTE_GLOBAL: "global",
    expander_pb2.ENTITY_ROUTE_CROSS_CATEGORY: "cross_category",
    expander_pb2.ENTITY_ROUTE_ATTRIBUTE: "attribute",
}
# Expander matches at or above this score are looked up as library names.
RESOLVE_MIN_SCORE = 0.6
# Attribute values passed on (the graph retriever accepts at most 50); a
# longer list is cut, not rejected: the first values are the user's first words.
MAX_ATTRIBUTE_VALUES = 50


class EntitySearch:
    """SearchEntities over the given clients; holds no retrieval logic."""

    def __init__(self, settings: GatewaySettings, expander: Expander, retrievers: Sequence[Retriever],
                 reranker: Reranker, fuser: Fuser) -> None:
        self.settings = settings
        self.expander = expander
        self.retrievers = list(retrievers)
        self.reranker = reranker
        self.fuser = fuser

    def _retrievers_for(self, route: str) -> list[Retriever]:
        wanted = self.settings.entity_retrievers_by_route.get(route, self.settings.entity_retrievers)
        return [r for r in self.retrievers if r.name in wanted]

    async def search(self, query: str, top_k: int, deadline: Deadline,
                     collections: tuple[str, ...] = ("default",)) -> gateway_pb2.SearchEntitiesResponse:
        """Library entities of ``collections`` for ``query``, best first,
        with evidence and score breakdown.

        Raises:
            DownstreamError: a service found the query invalid.
        """
        s = self.settings
        trace = Trace()
        started = time.perf_counter()
        embedding = asyncio.create_task(self._query_embedding(query, deadline, trace))
        try:
            norm = await guarded(
                trace, names.STAGE_NORMALIZE, "expander",
                lambda t: self.expander.normalize_entity(expander_pb2.NormalizeEntityRequest(query=query), t),
                expander_pb2.NormalizeEntityResponse(normalized_query=query, gate_reason="expander unavailable"),
                deadline, s.deadlines.expand)
        except BaseException:
            embedding.cancel()
            raise
        route = ROUTE_NAMES.get(norm.route, "none")
        request = retriever_pb2.RetrieveEntitiesRequest(
            query=query, resolved_names=[m.name for m in norm.matches if m.score >= RESOLVE_MIN_SCORE],
            top_k=max(top_k, s.profile_for("", 0.0)[1].retrieve_top_k), keywords=norm.keywords,
            # Attribute and category channels run whenever the query has the
            # shape, even when the route's confidence is too low to hard-route.
            attribute_values=norm.attribute_values[:MAX_ATTRIBUTE_VALUES], attribute_label=norm.attribute_label,
            categories=norm.categories if route in ("global", "cross_category") else [],
            query_embedding=await embedding, collections=collections,
        )
        candidates, summaries = await self._retrieve(request, route, deadline, trace)
        _add_expander_evidence(candidates, norm)
        rank_request = fuser_pb2.RankEntitiesRequest(
            query=query, normalized_query=norm.normalized_query, candidates=candidates, top_k=top_k,
            with_embeddings=any(e.channel.endswith("vector") for c in candidates for e in c.evidence),
            route_categories=list(norm.categories), route="" if route == "none" else route,
            attribute_values=list(norm.attribute_values),
        )
        rank_request.rerank_scores.update(await self._rerank(query, rank_request, deadline, trace))
        ranked = await guarded(trace, names.STAGE_RANK, "fuser", lambda t: self.fuser.rank_entities(rank_request, t),
                               None, deadline, s.deadlines.fuse)
        entities = list(ranked.entities) if ranked is not None else candidates[:top_k]
        trace.record(names.STAGE_TOTAL, started)
        return gateway_pb2.SearchEntitiesResponse(
            entities=entities, normalized_query=norm.normalized_query, rewritten=norm.rewritten, gate_reason=norm.gate_reason,
            route=route, route_confidence=norm.route_confidence, timings=trace.timings, degraded=trace.degraded,
            category_summaries=summaries,
        )

    async def _query_embedding(self, query: str, deadline: Deadline, trace: Trace) -> list[float]:
        """The query's embedding for the entity vector channel; [] (channel
        skipped, expander degraded) when the expander fails."""
        request = expander_pb2.EmbedRequest(texts=[query], kind=expander_pb2.EMBED_KIND_QUERY)
        reply = await guarded(trace, names.STAGE_EMBED, "expander", lambda t: self.expander.embed(request, t), None,
                              deadline, self.settings.deadlines.expand)
        return list(reply.vectors[0].values) if reply is not None and reply.vectors else []

    async def _retrieve(self, request: retriever_pb2.RetrieveEntitiesRequest, route: str, deadline: Deadline,
                        trace: Trace) -> tuple[list[entity_pb2.EntityCandidate], list[entity_pb2.CategorySummary]]:
        """Candidates of every retriever of ``route`` merged by name (evidence
        kept), and the category summaries they return (first per category).
        A retriever without the entity RPCs (UNIMPLEMENTED) is skipped."""
        async def one(retriever: Retriever) -> retriever_pb2.RetrieveEntitiesResponse:
            return await guarded(
                trace, names.retrieve_entities_stage(retriever.name), retriever.name,
                lambda t: retriever.retrieve_entities(request, t), retriever_pb2.RetrieveEntitiesResponse(),
                deadline, self.settings.deadlines.retrieve, skip_codes=(grpc.StatusCode.UNIMPLEMENTED,))

        responses = await asyncio.gather(*(one(r) for r in self._retrievers_for(route)))
        merged: dict[str, entity_pb2.EntityCandidate] = {}
        summaries: dict[str, entity_pb2.CategorySummary] = {}
        for response in responses:
            for c in response.candidates:
                if c.name in merged:
                    merged[c.name].evidence.extend(c.evidence)
                else:
                    merged[c.name] = c
            for summary in response.category_summaries:
                summaries.setdefault(summary.category, summary)
        return list(merged.values()), list(summaries.values())

    async def _rerank(self, query: str, rank_request: fuser_pb2.RankEntitiesRequest, deadline: Deadline,
                      trace: Trace) -> dict[str, float]:
        """Reranker scores of the entity cards (name, category, aliases,
        definition) of the ranked top ``rerank.max_passages`` (a first
        ranking without rerank scores picks them), min-max scaled to [0, 1]
        for the fuser's blend (exact-hit protection runs after it). {} and
        the stage SKIPPED when reranking is off, DEGRADED when the reranker
        fails (e.g. FAILED_PRECONDITION: no model configured)."""
        s = self.settings
        if not s.rerank.enabled or not rank_request.candidates:
            trace.skip(names.STAGE_RERANK, "rerank off" if not s.rerank.enabled else "no candidates")
            return {}
        first_request = fuser_pb2.RankEntitiesRequest()
        first_request.CopyFrom(rank_request)
        first_request.top_k = s.rerank.max_passages
        first = await guarded(trace, names.STAGE_RERANK_CANDIDATES, "fuser", lambda t: self.fuser.rank_entities(first_request, t),
                              None, deadline, s.deadlines.fuse)
        best = list(first.entities) if first is not None else list(rank_request.candidates)[: s.rerank.max_passages]
        passages = [
            reranker_pb2.Passage(id=c.name, text="；".join(p for p in (c.name, c.category, "、".join(c.aliases), c.definition) if p))
            for c in best
        ]
        request = reranker_pb2.RerankRequest(query=query, passages=passages)
        started = time.perf_counter()
        reply = await guarded(trace, names.STAGE_RERANK, "reranker", lambda t: self.reranker.rerank(request, t), None,
                              deadline, s.deadlines.rerank, record_ok=False)
        if reply is not None:
            trace.record(names.STAGE_RERANK, started, detail=rerank_detail(reply))
        scores = {p.id: p.score for p in reply.scores} if reply is not None else {}
        if not scores:
            return {}
        low, high = min(scores.values()), max(scores.values())
        return {name: (v - low) / (high - low) if high > low else 1.0 for name, v in scores.items()}


def _add_expander_evidence(candidates: list[entity_pb2.EntityCandidate], norm: expander_pb2.NormalizeEntityResponse) -> None:
    """The expander's name matches are evidence too (the ranking's "plan"
    signal): each match of a candidate becomes an "expander.match" evidence."""
    by_name = {c.name: c for c in candidates}
    for m in norm.matches:
        if m.name in by_name:
            by_name[m.name].evidence.append(entity_pb2.EntityEvidence(
                channel=names.EXPANDER_MATCH, score=m.score, matched=f"{m.method}:{m.matched}",
                relation=entity_pb2.ENTITY_RELATION_DIRECT))
