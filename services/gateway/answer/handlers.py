"""Answer and AnswerStream: the fallback chain picks the retrieval (and
takes the abstention decision), the generator writes the answer over it, or
the answer is an explicit no-answer when the evidence does not answer the
question. Both RPCs share one async generator of
``AnswerStreamResponse`` events (stage events, answer pieces, then the final
answer); Answer keeps the last one."""
from __future__ import annotations

from collections.abc import AsyncIterator

from prometheus_client import Counter

from graphmesh.gateway.v1 import gateway_pb2
from services.common import names
from services.gateway.answer import grounding
from services.gateway.answer.fallback_chain import STRATEGY_ENUM, Chosen, FallbackChain
from services.gateway.answer.generator import Generator, abstained_response, packed_labels
from services.gateway.search.fuse_request import Retrieval
from services.gateway.downstream.guard import Deadline, Trace
from services.gateway.search.scope import DEFAULT_SCOPE, Scope

ANSWER_STRATEGY = Counter("graphmesh_answer_strategy_total", "Answers by the strategy that answered them.", ("strategy",))
ABSTAINED = Counter("graphmesh_answer_abstained_total",
                    "Answers that abstained (no-answer) because the evidence does not answer the question, by reason: "
                    "low_evidence or no_evidence.", ("reason",))


def first_results(retrieval: Retrieval | None, top_k: int) -> Retrieval | None:
    """``retrieval`` cut to its first ``top_k`` results, and its packed
    context to the sources among them (the longest run of cited sources
    from [1] that are all among those results; the whole context when it
    holds no others, or when [1] is not among them). The chain searches at
    least JUDGED_RESULTS deep to judge the evidence; an answer is built from
    the sources asked for."""
    if retrieval is None or len(retrieval.response.results) <= top_k:
        return retrieval
    response = gateway_pb2.SearchResponse()
    response.CopyFrom(retrieval.response)
    del response.results[top_k:]
    kept = {c.id for c in response.results}
    n = next((i for i, cid in enumerate(retrieval.cited_ids) if cid not in kept), len(retrieval.cited_ids))
    if 0 < n < len(retrieval.cited_ids):
        response.context = grounding.first_sources(retrieval.response.context, n, packed_labels(retrieval))
        del response.context_ids[n:]
        return Retrieval(response, retrieval.cited_ids[:n], retrieval.cited_texts[:n], retrieval.by_id)
    return Retrieval(response, retrieval.cited_ids, retrieval.cited_texts, retrieval.by_id)


class Answerer:
    """Answers questions with the fallback chain and the generator."""

    def __init__(self, chain: FallbackChain, generator: Generator) -> None:
        self.chain = chain
        self.generator = generator

    async def events(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline,
                     scope: Scope = DEFAULT_SCOPE) -> AsyncIterator[gateway_pb2.AnswerStreamResponse]:
        """Stage events of the chain, answer pieces, and a final ``done``
        event whose answer says which strategy answered and why the others
        were passed over.

        Raises:
            DownstreamError: the query is invalid.
        """
        chosen = Chosen()
        async for event in self.chain.run(query, top_k, rerank, deadline, chosen, scope):
            yield event
        chosen.retrieval, chosen.evidence = first_results(chosen.retrieval, top_k), first_results(chosen.evidence, top_k)
        strategy = STRATEGY_ENUM.get(chosen.strategy, gateway_pb2.FALLBACK_STRATEGY_UNSPECIFIED)
        if chosen.abstained:
            trace = Trace()
            trace.skip(names.STAGE_GENERATE, f"abstained: {chosen.decision.reason}")
            yield gateway_pb2.AnswerStreamResponse(stage=trace.timings[-1])
            done = abstained_response(query, chosen.evidence or chosen.retrieval, chosen.decision, trace.timings)
            done.strategy = strategy
            done.attempts.extend(chosen.attempts)
            ABSTAINED.labels("low_evidence" if chosen.evidence is not None else "no_evidence").inc()
            ANSWER_STRATEGY.labels(chosen.strategy or "none").inc()
            yield gateway_pb2.AnswerStreamResponse(done=done)
            return
        async for event in self.generator.generate(query, chosen.retrieval, deadline):
            if event.HasField("done"):
                event.done.strategy = strategy
                event.done.attempts.extend(chosen.attempts)
                if chosen.decision is not None:
                    event.done.answerability = chosen.decision.answerability
                    event.done.answerability_threshold = chosen.decision.threshold
                ANSWER_STRATEGY.labels(chosen.strategy or "none").inc()
            yield event

    async def answer(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline,
                     scope: Scope = DEFAULT_SCOPE) -> gateway_pb2.AnswerResponse:
        """The final answer of ``events``."""
        final = gateway_pb2.AnswerResponse()
        async for event in self.events(query, top_k, rerank, deadline, scope):
            if event.HasField("done"):
                final = event.done
        return final
