"""DeepSearch (MetaSearch deep iterative retrieval,
the MetaSearch design (docs/references.md)): retrieve with this round's
queries, partial answer, LLM sub-queries scored against the question, the
best k next round; stop on the information growth rate or the iteration
cap (rules in ``deep``); a final synthesis over all evidence, fused with RRF
and packed under the usual quotas."""
from __future__ import annotations

import logging
import time

import grpc
from prometheus_client import Counter

from graphmesh.expander.v1 import expander_pb2
from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import DownstreamError
from services.gateway.search import deep_rules
from services.gateway.downstream.interfaces import Expander
from services.gateway.config import GatewaySettings
from services.gateway.search.fuse_request import Retrieval
from services.gateway.answer.generator import Generator
from services.gateway.downstream.guard import Deadline, Trace
from services.gateway.search.scope import DEFAULT_SCOPE, Scope
from services.gateway.search.pipeline import SearchFlow

log = logging.getLogger("graphmesh.gateway.deep")

DEEP_ITERATIONS = Counter("graphmesh_deep_iterations_total", "DeepSearch iterations run.")


class DeepSearcher:
    """Runs DeepSearch over ``search``, the expander's sub-queries and the
    generator."""

    def __init__(self, settings: GatewaySettings, search: SearchFlow, expander: Expander, generator: Generator) -> None:
        self.settings = settings
        self.search = search
        self.expander = expander
        self.generator = generator

    async def run(self, query: str, top_k: int, max_iterations: int, k: int, threshold: float,
                  deadline: Deadline, scope: Scope = DEFAULT_SCOPE) -> gateway_pb2.DeepSearchResponse:
        """Iterates at most ``max_iterations`` times with ``k`` sub-queries a
        round, stopping when new / known chunk ids < ``threshold``.

        Raises:
            DownstreamError: the first round found the query invalid.
        """
        s = self.settings
        response = gateway_pb2.DeepSearchResponse()
        known: list[str] = []
        lists: list[fuser_pb2.CandidateList] = []
        asked = {query}
        queries = [query]
        for number in range(1, max_iterations + 1):
            started = time.perf_counter()
            DEEP_ITERATIONS.inc()
            retrievals = await self._retrieve(queries, top_k, deadline, first=number == 1, scope=scope)
            fresh = deep_rules.new_ids([c.id for r in retrievals for c in r.response.results], known)
            rate = deep_rules.growth_rate(len(fresh), len(known))
            iteration = gateway_pb2.DeepIteration(number=number, queries=queries, new_chunk_ids=fresh,
                                                  known_chunks=len(known), growth_rate=rate)
            known.extend(fresh)
            lists.extend(fuser_pb2.CandidateList(producer=f"deep.{number}.{i}", candidates=r.response.results)
                         for i, r in enumerate(retrievals))
            decision = deep_rules.should_stop(number, rate, max_iterations, threshold)
            if not decision.stop:
                context = "\n".join(r.response.context for r in retrievals)[: s.deep.partial_context_chars]
                texts = [t for r in retrievals for t in r.cited_texts]
                iteration.partial_answer = await self.generator.partial_answer(query, context, texts, deadline)
                iteration.proposed.extend(await self._sub_queries(query, iteration.partial_answer, k, deadline))
                queries = deep_rules.next_queries(((p.text, p.score) for p in iteration.proposed), asked, k)
                asked.update(queries)
                decision = deep_rules.should_stop(number, rate, max_iterations, threshold, has_sub_queries=bool(queries))
            iteration.duration_ms = (time.perf_counter() - started) * 1000
            response.iterations.append(iteration)
            if decision.stop:
                response.stop_reason = decision.reason
                break
        response.evidence_ids.extend(known)
        final = await self.search.fuse(query, lists, top_k, deadline, Trace(), gateway_pb2.QueryInfo(normalized_query=query))
        async for event in self.generator.generate(query, final, deadline):
            if event.HasField("done"):
                response.answer.CopyFrom(event.done)
        return response

    async def _retrieve(self, queries: list[str], top_k: int, deadline: Deadline, first: bool,
                        scope: Scope = DEFAULT_SCOPE) -> list[Retrieval]:
        """One round's retrievals, one query after another (the services
        share the CPU); a failed query is logged and left out."""
        out = []
        for q in queries:
            try:
                out.append(await self.search.search(q, top_k, None, deadline, scope=scope))
            except DownstreamError as err:
                if err.code == grpc.StatusCode.INVALID_ARGUMENT and first:
                    raise
                log.warning("deep search: query %r failed: %s", q, err)
        return out

    async def _sub_queries(self, query: str, partial_answer: str, k: int, deadline: Deadline) -> list[gateway_pb2.ScoredQuery]:
        """The expander's sub-queries (LLM, else keyword combinations) scored
        by cosine to the question; [] when the expander fails."""
        timeout = deadline.left(self.settings.strategy_timeouts.get("sub_queries", 30.0))
        request = expander_pb2.RewriteRequest(query=query, kind=expander_pb2.REWRITE_KIND_SUB_QUERIES, context=partial_answer,
                                              max_results=k + 1, timeout_seconds=max(0.5, timeout - 0.2))
        try:
            reply = await self.expander.rewrite(request, timeout)
        except DownstreamError as err:
            log.warning("deep search: sub-queries failed: %s", err)
            return []
        return [gateway_pb2.ScoredQuery(text=r.text, score=r.score) for r in reply.rewrites]
