"""Entity search and knowledge ingestion through the gateway.

SearchEntities: expander.NormaliseEntity (gate + route) -> every retriever's
RetrieveEntities in parallel (graph: lookup, full-text, attribute, category,
expansion; PostgreSQL: entity-card keyword and vector channels; a retriever
without the RPC is skipped) -> optional cross-encoder rerank of the entity
cards (GRAPHMESH_GATEWAY_RERANK_ENABLED) -> fuser.RankEntities (gate,
weighted score, rerank blend, protections). A failing expander or fuser degrades
the answer: without the expander the raw query is searched, without the
fuser candidates come back in retriever order (still library entities).
"""
from __future__ import annotations

import asyncio
import time

import grpc

from graphmesh.common.v1 import entity_pb2, types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.reranker.v1 import reranker_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common.jsonl_entities import parse_entities, parse_triples
from services.gateway.pipeline import DEGRADED, SKIPPED, Deadline, Pipeline, Trace, _describe

ROUTE_NAMES = {
    expander_pb2.ENTITY_ROUTE_LOCAL: "local",
    expander_pb2.ENTITY_ROUTE_GLOBAL: "global",
    expander_pb2.ENTITY_ROUTE_CROSS_CATEGORY: "cross_category",
    expander_pb2.ENTITY_ROUTE_ATTRIBUTE: "attribute",
}
ENTITY_BATCH = 5_000
TRIPLE_BATCH = 50_000
# Expander matches at or above this score are looked up as library names.
RESOLVE_MIN_SCORE = 0.6
# Attribute values passed on (the graph retriever accepts at most 50); a
# longer list is cut, not rejected: the first values are the user's first words.
MAX_ATTRIBUTE_VALUES = 50
# Surfaces embedded per entity (name + aliases); retriever_pg stores at most 16.
SURFACES_PER_ENTITY = 16


class EntitySearch:
    """Uses the Pipeline's channels and stubs; holds no retrieval logic."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.p = pipeline

    def _stubs(self, route: str = ""):
        names = self.p.settings.entity_retrievers_by_route.get(route, self.p.settings.entity_retrievers)
        return [(n, st) for n, st in self.p.retrievers.items() if n in names]

    async def search(self, query: str, top_k: int, deadline: Deadline) -> gateway_pb2.SearchEntitiesResponse:
        """Runs normalise (with the query embedding alongside) -> retrieve
        (parallel) -> rerank (optional) -> rank for ``query``."""
        s = self.p.settings
        trace = Trace()
        total = time.perf_counter()
        started = time.perf_counter()
        norm = expander_pb2.NormaliseEntityResponse(normalized_query=query, gate_reason="expander unavailable")
        embedding = asyncio.create_task(self._query_embedding(query, deadline, trace))  # alongside NormaliseEntity
        try:
            norm = await self.p.expander.NormaliseEntity(expander_pb2.NormaliseEntityRequest(query=query), timeout=deadline.left(s.expand_timeout))
            trace.record("normalise", started)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                embedding.cancel()
                raise
            if "expander" not in trace.degraded:
                trace.degraded.append("expander")
            trace.record("normalise", started, DEGRADED, _describe(err))
        route = ROUTE_NAMES.get(norm.route, "none")
        query_embedding = await embedding
        resolved = [m.name for m in norm.matches if m.score >= RESOLVE_MIN_SCORE]
        request = retriever_pb2.RetrieveEntitiesRequest(
            query=query, resolved_names=resolved, top_k=max(top_k, self.p.profile_for("", 0.0)[1].retrieve_top_k), keywords=norm.keywords,
            # Attribute and category channels run whenever the query has the
            # shape, even when the route's confidence is too low to hard-route.
            attribute_values=norm.attribute_values[:MAX_ATTRIBUTE_VALUES], attribute_label=norm.attribute_label,
            categories=norm.categories if route in ("global", "cross_category") else [],
            query_embedding=query_embedding,
        )
        candidates, summaries = await self._retrieve(request, route, deadline, trace)
        # The expander's matches are evidence too (the "plan" signal).
        by_name = {c.name: c for c in candidates}
        for m in norm.matches:
            if m.name in by_name:
                by_name[m.name].evidence.append(entity_pb2.EntityEvidence(
                    channel="expander.match", score=m.score, matched=f"{m.method}:{m.matched}",
                    relation=entity_pb2.ENTITY_RELATION_DIRECT))
        rerank_scores = await self._rerank(query, candidates, deadline, trace)
        started = time.perf_counter()
        try:
            ranked = await self.p.fuser.RankEntities(fuser_pb2.RankEntitiesRequest(
                query=query, normalized_query=norm.normalized_query, candidates=candidates, top_k=top_k,
                with_embeddings=any(e.channel.endswith("vector") for c in candidates for e in c.evidence),
                route_categories=list(norm.categories),
                route="" if route == "none" else route, attribute_values=list(norm.attribute_values),
                rerank_scores=rerank_scores,
            ), timeout=deadline.left(s.fuse_timeout))
            entities = list(ranked.entities)
            trace.record("rank", started)
        except grpc.aio.AioRpcError as err:
            trace.degraded.append("fuser")
            trace.record("rank", started, DEGRADED, _describe(err))
            entities = candidates[:top_k]
        trace.record("total", total)
        return gateway_pb2.SearchEntitiesResponse(
            entities=entities, normalized_query=norm.normalized_query, rewritten=norm.rewritten, gate_reason=norm.gate_reason,
            route=route, route_confidence=norm.route_confidence, timings=trace.timings, degraded=trace.degraded,
            category_summaries=summaries,
        )

    async def _rerank(self, query: str, candidates: list[entity_pb2.EntityCandidate], deadline: Deadline, trace: Trace) -> dict[str, float]:
        """Cross-encoder scores of the entity cards (name, category, aliases,
        definition) for ``query``, min-max scaled to [0, 1] for the fuser's
        blend (exact-hit protection runs after it). {} and the stage
        reported skipped when reranking is off, degraded when the reranker
        fails (e.g. FAILED_PRECONDITION: no model configured)."""
        s = self.p.settings
        if not s.rerank_enabled or not candidates:
            trace.timings.append(types_pb2.StageTiming(stage="rerank", status=SKIPPED, detail="rerank off" if not s.rerank_enabled else "no candidates"))
            return {}
        started = time.perf_counter()
        passages = [
            reranker_pb2.Passage(id=c.name, text="；".join(p for p in (c.name, c.category, "、".join(c.aliases), c.definition) if p))
            for c in candidates[: s.rerank_max_passages]
        ]
        try:
            reply = await self.p.reranker.Rerank(reranker_pb2.RerankRequest(query=query, passages=passages), timeout=deadline.left(s.rerank_timeout))
        except grpc.aio.AioRpcError as err:
            trace.degraded.append("reranker")
            trace.record("rerank", started, DEGRADED, _describe(err))
            return {}
        trace.record("rerank", started)
        scores = {p.id: p.score for p in reply.scores}
        if not scores:
            return {}
        low, high = min(scores.values()), max(scores.values())
        return {name: (v - low) / (high - low) if high > low else 1.0 for name, v in scores.items()}

    async def _query_embedding(self, query: str, deadline: Deadline, trace: Trace) -> list[float]:
        """The query's embedding for the entity vector channel; [] (channel
        skipped, expander marked degraded) when the expander fails."""
        started = time.perf_counter()
        try:
            reply = await self.p.expander.Embed(
                expander_pb2.EmbedRequest(texts=[query], kind=expander_pb2.EMBED_KIND_QUERY),
                timeout=deadline.left(self.p.settings.expand_timeout))
            trace.record("embed", started)
            return list(reply.vectors[0].values) if reply.vectors else []
        except grpc.aio.AioRpcError as err:
            if "expander" not in trace.degraded:
                trace.degraded.append("expander")
            trace.record("embed", started, DEGRADED, _describe(err))
            return []

    async def _surface_embeddings(self, records, deadline: Deadline, trace: Trace) -> list[list[list[float]]]:
        """Per entity, the embeddings of its surfaces (name, then distinct
        aliases, at most SURFACES_PER_ENTITY), for retrievers with an entity
        vector channel. Empty (keyword channels only) when the expander fails."""
        started = time.perf_counter()
        per_entity = [list(dict.fromkeys([r.name] + [a for a in r.aliases if a.strip()]))[:SURFACES_PER_ENTITY] for r in records]
        texts = [t for ts in per_entity for t in ts]
        vectors: list[list[float]] = []
        size = self.p.settings.embed_batch
        try:
            for start in range(0, len(texts), size):
                reply = await self.p.expander.Embed(
                    expander_pb2.EmbedRequest(texts=texts[start : start + size], kind=expander_pb2.EMBED_KIND_PASSAGE),
                    timeout=deadline.left(600))
                vectors.extend(list(v.values) for v in reply.vectors)
        except grpc.aio.AioRpcError as err:
            trace.degraded.append("expander")
            trace.record("embed", started, DEGRADED, _describe(err))
            return []
        trace.record("embed", started)
        out, at = [], 0
        for ts in per_entity:
            out.append(vectors[at : at + len(ts)])
            at += len(ts)
        return out

    async def _retrieve(self, request: retriever_pb2.RetrieveEntitiesRequest, route: str, deadline: Deadline, trace: Trace
                        ) -> tuple[list[entity_pb2.EntityCandidate], list[entity_pb2.CategorySummary]]:
        """Candidates of every retriever merged by name (evidence kept), and
        the category summaries they return (first per category)."""
        async def one(name, stub) -> retriever_pb2.RetrieveEntitiesResponse:
            started = time.perf_counter()
            stage = f"retrieve_entities.{name.removeprefix('retriever_')}"
            try:
                response = await stub.RetrieveEntities(request, timeout=deadline.left(self.p.settings.retrieve_timeout))
                trace.record(stage, started)
                return response
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise
                if err.code() == grpc.StatusCode.UNIMPLEMENTED:
                    trace.timings.append(types_pb2.StageTiming(stage=stage, status=SKIPPED, detail="no entity channel"))
                else:
                    trace.degraded.append(name)
                    trace.record(stage, started, DEGRADED, _describe(err))
                return retriever_pb2.RetrieveEntitiesResponse()

        responses = await asyncio.gather(*(one(n, st) for n, st in self._stubs(route)))
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

    async def ingest(self, payload: bytes, kind: int, deadline: Deadline) -> tuple[gateway_pb2.IngestResponse, list]:
        """Parses entities or triples and stores them in every retriever that
        has the entity RPCs (UNIMPLEMENTED ones are skipped)."""
        trace = Trace()
        started = time.perf_counter()
        if kind == gateway_pb2.INGEST_KIND_ENTITIES:
            records, failures, line_of = parse_entities(payload)
            batch, rpc = ENTITY_BATCH, "IngestEntities"
            surfaces: list[list[list[float]]] = []

            def make(start: int):
                return retriever_pb2.IngestEntitiesRequest(entities=records[start : start + batch], surface_embeddings=[
                    retriever_pb2.EntitySurfaceEmbeddings(surfaces=[retriever_pb2.EntityEmbedding(values=v) for v in vs])
                    for vs in surfaces[start : start + batch]
                ])
        else:
            records, failures, line_of = parse_triples(payload)
            batch, rpc = TRIPLE_BATCH, "IngestTriples"

            def make(start: int):
                return retriever_pb2.IngestTriplesRequest(triples=records[start : start + batch])
        response = gateway_pb2.IngestResponse(received=len(records) + len(failures))
        response.failures.extend(
            types_pb2.IngestFailure(index=f.index, id=f.id, reason=f"{f.field + ': ' if f.field else ''}{f.reason}") for f in failures)
        trace.record("parse", started)
        if not records:
            return response, failures
        if kind == gateway_pb2.INGEST_KIND_ENTITIES:
            surfaces.extend(await self._surface_embeddings(records, deadline, trace))
        started = time.perf_counter()
        stored_by: dict[str, int] = {}
        unchanged_by: dict[str, int] = {}
        for name, stub in self._stubs():
            total = same = 0
            try:
                for start in range(0, len(records), batch):
                    reply = await getattr(stub, rpc)(make(start), timeout=deadline.left(600))
                    total += reply.stored
                    same += getattr(reply, "unchanged", 0)
                    for f in reply.failures:
                        response.failures.append(types_pb2.IngestFailure(index=line_of[f.index + start], id=f.id, reason=f"{name}: {f.reason}"))
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.UNIMPLEMENTED:
                    continue
                raise
            stored_by[name] = total
            unchanged_by[name] = same
        # A record counts as unchanged only where every store left it alone.
        response.unchanged = min(unchanged_by.values(), default=0)
        response.stored = max((stored_by[n] + unchanged_by[n] - response.unchanged for n in stored_by), default=0)
        trace.record("store", started)
        response.timings.extend(trace.timings)
        return response, failures
