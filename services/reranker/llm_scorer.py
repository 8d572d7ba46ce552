"""LLM scorer: pointwise relevance as the probability that an
OpenAI-compatible chat model answers "yes" to "is this passage relevant to
the query?", read from the first generated token's top log-probabilities
(one call per pair, ``max_tokens`` 1). For small candidate sets: each pair is
a full prompt evaluation."""
from __future__ import annotations

import asyncio

from services.common.llm import LlmClient, LlmError, yes_probability
from services.reranker.scorer import Prepared, ScorerUnavailable
from services.reranker.truncation import character_spans, cut_passages, cut_text

SYSTEM = ("You judge search results. Given a query and a passage, answer with exactly one word: "
          "yes if the passage helps answer the query, no otherwise.")
TOP_LOGPROBS = 10


def messages_for(query: str, passage: str) -> list[dict[str, str]]:
    """The chat messages asking whether ``passage`` is relevant to ``query``."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Query: {query}\n\nPassage: {passage}\n\nDoes the passage help answer the query? Answer yes or no."},
    ]


class LlmScorer:
    """Scores pairs by the LLM's yes-probability.

    Args:
        client: the shared LLM client (its config names the endpoint).
        concurrency: calls in flight at once.
        max_passage_chars: passage characters shown (longer: heading + head, counted).
        max_query_chars: query characters shown.
    """

    name = "llm"
    padded = False

    def __init__(self, client: LlmClient, concurrency: int = 2, max_passage_chars: int = 1200, max_query_chars: int = 500) -> None:
        self.client = client
        self.max_passage_chars = max_passage_chars
        self.max_query_chars = max_query_chars
        self._slots = asyncio.Semaphore(concurrency)

    @property
    def model(self) -> str:
        return self.client.config.model or "llm"

    @property
    def device(self) -> str:
        return "remote"

    async def prepare(self, query: str, passages: list[str]) -> Prepared:
        if not self.client.enabled:
            raise ScorerUnavailable("no_model", "no LLM endpoint configured (GRAPHMESH_RERANKER_LLM__BASE_URL)")
        q = cut_text(query, character_spans([query])[0], self.max_query_chars)
        fitted = cut_passages(passages, self.max_passage_chars, character_spans)
        return Prepared(q.text, [f.text for f in fitted], [q.tokens + f.tokens for f in fitted], sum(f.cut for f in fitted))

    async def _one(self, query: str, passage: str) -> float:
        async with self._slots:
            try:
                tokens = await self.client.top_logprobs(messages_for(query, passage), top_logprobs=TOP_LOGPROBS,
                                                        max_tokens=1, purpose="rerank")
            except LlmError as err:
                raise ScorerUnavailable("backend", f"LLM scoring failed: {err}") from err
        probability = yes_probability(tokens[0]) if tokens else None
        return probability if probability is not None else 0.0

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        return list(await asyncio.gather(*(self._one(q, p) for q, p in pairs)))

    async def close(self) -> None:
        await self.client.close()
