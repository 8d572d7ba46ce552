"""Answer and AnswerStream: the fallback chain picks the retrieval, the
generator writes the answer over it. Both RPCs share one async generator of
``AnswerStreamResponse`` events (stage events, answer pieces, then the final
answer); Answer keeps the last one."""
from __future__ import annotations

from collections.abc import AsyncIterator

from prometheus_client import Counter

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.answer_chain import STRATEGY_ENUM, Chosen, FallbackChain
from services.gateway.generator import Generator
from services.gateway.guard import Deadline
from services.gateway.scope import DEFAULT_SCOPE, Scope

ANSWER_STRATEGY = Counter("graphmesh_answer_strategy_total", "Answers by the strategy that answered them.", ("strategy",))


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
        async for event in self.generator.generate(query, chosen.retrieval, deadline):
            if event.HasField("done"):
                event.done.strategy = STRATEGY_ENUM.get(chosen.strategy, gateway_pb2.FALLBACK_STRATEGY_UNSPECIFIED)
                event.done.attempts.extend(chosen.attempts)
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
