"""The Answer path of the gateway: the self-healing fallback chain, grounded
generation with citations (streamed), and deep iterative retrieval.

Everything is an async generator of ``AnswerStreamResponse`` events (stage
events, answer pieces, then the final answer) so that Answer, AnswerStream
and DeepSearch share one implementation; Answer just keeps the last event.
Retrieval is ``Pipeline.search`` (full pipeline) or ``fast_search`` (PG only).
Rules live in ``fallback`` and ``deep`` (pure, tested directly).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc
from prometheus_client import Counter

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import text as textutil
from services.common.llm import LlmClient, LlmConfig, LlmError
from services.gateway import deep, fallback, generation
from services.gateway.pipeline import DEGRADED, OK, SKIPPED, Deadline, Pipeline, SearchOutcome, Trace, _describe

log = logging.getLogger("graphmesh.gateway.answer")

FALLBACK_ATTEMPTS = Counter(
    "graphmesh_fallback_attempts_total",
    "Fallback-chain strategies tried, by outcome (answered, passed_over, skipped) and reason kind.",
    ("strategy", "outcome", "reason"),
)
ANSWER_STRATEGY = Counter("graphmesh_answer_strategy_total", "Answers by the strategy that answered them.", ("strategy",))
ANSWER_CLEANUP = Counter(
    "graphmesh_answer_cleanup_total", "Items removed from LLM answers: invalid_citation, fence.", ("kind",)
)
DEEP_ITERATIONS = Counter("graphmesh_deep_iterations_total", "DeepSearch iterations run.")

STRATEGY_ENUM = {
    fallback.STANDARD: gateway_pb2.FALLBACK_STRATEGY_STANDARD,
    fallback.EXPANDED_QUERY: gateway_pb2.FALLBACK_STRATEGY_EXPANDED_QUERY,
    fallback.HYDE: gateway_pb2.FALLBACK_STRATEGY_HYDE,
    fallback.ENTITY_NAMES: gateway_pb2.FALLBACK_STRATEGY_ENTITY_NAMES,
    fallback.FAST_PATH: gateway_pb2.FALLBACK_STRATEGY_FAST_PATH,
}
NO_EVIDENCE = "未检索到相关资料。"


class _Skip(Exception):
    """A strategy that cannot run (nothing to retrieve with)."""


def _reason_kind(reason: str) -> str:
    for key, kind in (("timed out", "timeout"), ("unavailable", "service_down"), ("empty", "empty"), ("evidence", "low_evidence")):
        if key in reason:
            return kind
    return "other"


def _stage_event(stage: str, duration_ms: float = 0.0, status: int = OK, detail: str = "") -> gateway_pb2.AnswerStreamResponse:
    return gateway_pb2.AnswerStreamResponse(
        stage=types_pb2.StageTiming(stage=stage, duration_ms=duration_ms, status=status, detail=detail)
    )


@dataclass
class _Chosen:
    """The retrieval the answer is built on."""

    outcome: SearchOutcome | None = None
    strategy: str = ""
    attempts: list[gateway_pb2.StrategyAttempt] = field(default_factory=list)


class AnswerFlow:
    """Fallback chain, generation and deep retrieval over a ``Pipeline``."""

    def __init__(self, pipeline: Pipeline, llm: LlmClient | None = None) -> None:
        self.p = pipeline
        self.s = pipeline.settings
        s = self.s
        self.llm = llm or LlmClient(LlmConfig(
            base_url=s.llm_base_url, api_key=s.llm_api_key, model=s.llm_model, timeout=s.llm_timeout,
            max_retries=s.llm_max_retries, backoff=s.llm_backoff,
        ))

    async def close(self) -> None:
        """Releases the LLM client's connections."""
        await self.llm.close()

    # ---- retrieval ------------------------------------------------------
    async def fast_search(self, query: str, top_k: int, deadline: Deadline) -> SearchOutcome:
        """The fast path: PostgreSQL vector + keyword channels only, no graph,
        no rerank, then the fuser's packing (arrival order without it).

        Raises:
            grpc.aio.AioRpcError: retriever_pg failed.
        """
        s = self.s
        trace = Trace()
        started = time.perf_counter()
        keywords: list[str] = []
        embedding: list[float] = []
        info = gateway_pb2.QueryInfo(normalized_query=query)
        try:
            expanded = await self.p.expander.Expand(expander_pb2.ExpandRequest(query=query, embed=True), timeout=deadline.left(s.expand_timeout))
            keywords, embedding = list(expanded.keywords), list(expanded.embedding)
            info = gateway_pb2.QueryInfo(normalized_query=expanded.normalized_query, keywords=keywords,
                                         question_type=expander_pb2.QuestionType.Name(expanded.question_type))
            trace.record("expand", started)
        except grpc.aio.AioRpcError as err:
            keywords = textutil.query_keywords(query)
            info.keywords.extend(keywords)
            trace.degraded.append("expander")
            trace.record("expand", started, DEGRADED, _describe(err))
        started = time.perf_counter()
        _, profile = self.p.profile_for("", 0.0)  # the default profile
        reply = await self.p.retrievers["retriever_pg"].Retrieve(
            retriever_pb2.RetrieveRequest(query=info.normalized_query or query, keywords=keywords, query_embedding=embedding, top_k=profile.retrieve_top_k),
            timeout=deadline.left(s.retrieve_timeout),
        )
        trace.record("retrieve.pg", started)
        trace.timings.append(types_pb2.StageTiming(stage="retrieve.graph", status=SKIPPED, detail="fast path"))
        trace.timings.append(types_pb2.StageTiming(stage="rerank", status=SKIPPED, detail="fast path"))
        lists = [fuser_pb2.CandidateList(producer="retriever_pg", candidates=reply.candidates)]
        return await self._fuse(query, lists, top_k, deadline, trace, info)

    async def _fuse(self, query: str, lists: list[fuser_pb2.CandidateList], top_k: int, deadline: Deadline,
                    trace: Trace, info: gateway_pb2.QueryInfo) -> SearchOutcome:
        _, profile = self.p.profile_for("", 0.0)  # the default profile
        return await self.p.fuse_and_pack(query, lists, profile, top_k, deadline, trace, info)

    async def _rewrite(self, kind: int, query: str, timeout: float, context: str = "", n: int = 0) -> expander_pb2.RewriteResponse:
        return await self.p.expander.Rewrite(
            expander_pb2.RewriteRequest(query=query, kind=kind, context=context, max_results=n, timeout_seconds=max(0.5, timeout - 0.2)),
            timeout=timeout,
        )

    async def _strategy_query(self, strategy: str, query: str, names: list[str], timeout: float) -> str:
        if strategy in (fallback.STANDARD, fallback.FAST_PATH):
            return query
        if strategy == fallback.ENTITY_NAMES:
            text = fallback.entity_names_query(query, names)
            if text == query:
                raise _Skip("no entity names seen")
            return text
        kind = expander_pb2.REWRITE_KIND_EXPANDED_QUERY if strategy == fallback.EXPANDED_QUERY else expander_pb2.REWRITE_KIND_HYDE
        reply = await self._rewrite(kind, query, timeout)
        if not reply.rewrites:
            raise _Skip(("no LLM for HyDE" if strategy == fallback.HYDE else "no expansion") + (f" ({reply.fallback_reason})" if reply.fallback_reason else ""))
        return reply.rewrites[0].text

    async def chain(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline, chosen: _Chosen) -> AsyncIterator[gateway_pb2.AnswerStreamResponse]:
        """Runs the fallback chain until a strategy's retrieval is accepted;
        fills ``chosen`` (the best retrieval seen when none is accepted) and
        yields stage events. Raises INVALID_ARGUMENT errors of the standard
        strategy unchanged."""
        s = self.s
        names: list[str] = []
        best: tuple[float, SearchOutcome, str] | None = None
        skip_full = ""
        enabled = [x for x in fallback.ORDER if x in s.fallback_strategies]
        for strategy in enabled:
            started = time.perf_counter()
            attempt = gateway_pb2.StrategyAttempt(strategy=STRATEGY_ENUM[strategy])
            if strategy in fallback.FULL_PIPELINE and skip_full:
                attempt.reason = f"skipped: {skip_full}"
                chosen.attempts.append(attempt)
                FALLBACK_ATTEMPTS.labels(strategy, "skipped", "service_down").inc()
                yield _stage_event(f"strategy.{strategy}", 0.0, SKIPPED, attempt.reason)
                continue
            timeout = deadline.left(s.strategy_timeouts.get(strategy, 15.0))
            end = time.monotonic() + timeout
            outcome = None
            try:
                text = await self._strategy_query(strategy, query, names, timeout)
                attempt.query = text
                sub_deadline = Deadline(max(0.001, end - time.monotonic()))
                if strategy == fallback.FAST_PATH:
                    coro = self.fast_search(text, top_k, sub_deadline)
                else:
                    coro = self.p.search(text, top_k, rerank, sub_deadline)
                outcome = await asyncio.wait_for(coro, timeout=max(0.001, end - time.monotonic()))
            except _Skip as skip:
                attempt.reason = f"skipped: {skip}"
            except asyncio.TimeoutError:
                attempt.reason = f"timed out after {timeout:.1f}s"
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.INVALID_ARGUMENT and strategy == fallback.STANDARD:
                    raise
                attempt.reason = _describe(err)
            attempt.duration_ms = (time.perf_counter() - started) * 1000
            if outcome is not None:
                results = outcome.response.results
                for timing in outcome.response.timings:
                    yield gateway_pb2.AnswerStreamResponse(stage=timing)
                attempt.results = len(results)
                attempt.evidence_score = fallback.evidence_score(results)
                verdict = fallback.judge(len(results), attempt.evidence_score, s.min_evidence_score, outcome.response.degraded)
                for cand in results:
                    names.extend([cand.title, *cand.heading_path])
                if results and (best is None or attempt.evidence_score > best[0]):
                    best = (attempt.evidence_score, outcome, strategy)
                if verdict.accepted:
                    attempt.answered = True
                    chosen.outcome, chosen.strategy = outcome, strategy
                    chosen.attempts.append(attempt)
                    FALLBACK_ATTEMPTS.labels(strategy, "answered", "").inc()
                    yield _stage_event(f"strategy.{strategy}", attempt.duration_ms, OK, "answered")
                    return
                attempt.reason = verdict.reason
                if strategy in fallback.FULL_PIPELINE and "unavailable" in verdict.reason:
                    skip_full = verdict.reason
            chosen.attempts.append(attempt)
            outcome_label = "skipped" if attempt.reason.startswith("skipped") else "passed_over"
            FALLBACK_ATTEMPTS.labels(strategy, outcome_label, _reason_kind(attempt.reason)).inc()
            yield _stage_event(f"strategy.{strategy}", attempt.duration_ms, SKIPPED if outcome_label == "skipped" else DEGRADED, attempt.reason)
            if deadline.left(1e9) <= 0.001:
                break
        if best is not None:
            # Nothing passed: answer from the best retrieval seen, and say so.
            chosen.outcome, chosen.strategy = best[1], best[2]
            for attempt in chosen.attempts:
                if attempt.strategy == STRATEGY_ENUM[best[2]]:
                    attempt.answered = True
                    attempt.reason = f"best available ({attempt.reason})"
                    break

    # ---- generation -----------------------------------------------------
    async def generate(self, query: str, outcome: SearchOutcome | None, deadline: Deadline, max_tokens: int | None = None) -> AsyncIterator[gateway_pb2.AnswerStreamResponse]:
        """Yields answer pieces from the LLM (grounded in the packed,
        numbered context), then one ``done`` event with the cleaned answer and
        its citations; extractive when there is no LLM or it fails."""
        s = self.s
        trace = Trace()
        started = time.perf_counter()
        mode = gateway_pb2.ANSWER_MODE_EXTRACTIVE
        text, removed, fences = "", 0, 0
        cited_ids = outcome.cited_ids if outcome else []
        if self.llm.enabled and cited_ids:
            pieces: list[str] = []
            try:
                async for piece in generation.stream_answer(
                    self.llm, query, outcome.response.context, max_tokens or s.llm_max_tokens, deadline.left(s.llm_timeout)
                ):
                    pieces.append(piece)
                    yield gateway_pb2.AnswerStreamResponse(token=piece)
                cleaned = generation.clean_answer("".join(pieces), len(cited_ids))
                text, removed, fences = cleaned.text, cleaned.invalid_citations_removed, cleaned.fences_removed
                ANSWER_CLEANUP.labels("invalid_citation").inc(removed)
                ANSWER_CLEANUP.labels("fence").inc(fences)
                if text:
                    mode = gateway_pb2.ANSWER_MODE_LLM
                    trace.record("generate", started)
                else:
                    trace.degraded.append("llm")
                    trace.record("generate", started, DEGRADED, "empty LLM answer")
            except LlmError as err:
                log.warning("LLM generation failed: %s", err)
                trace.degraded.append("llm")
                trace.record("generate", started, DEGRADED, err.reason)
        if mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE:
            text = generation.extractive_answer(outcome.cited_texts) if cited_ids else NO_EVIDENCE
            if not trace.timings:
                trace.record("generate", started, SKIPPED, "no LLM configured; extractive answer" if not self.llm.enabled else "no evidence")
        yield gateway_pb2.AnswerStreamResponse(stage=trace.timings[-1])
        numbers = generation.citation_numbers(text)
        citations = []
        for number, cid in enumerate(cited_ids, start=1):
            if number in numbers and cid in outcome.by_id:
                cand = outcome.by_id[cid]
                citations.append(gateway_pb2.Citation(
                    number=number, candidate_id=cid, document_id=cand.document_id,
                    label=" ".join([cand.title] + [h for h in cand.heading_path if h != cand.title]),
                ))
        search = gateway_pb2.SearchResponse()
        if outcome is not None:
            search.CopyFrom(outcome.response)
        search.timings.extend(trace.timings)
        search.degraded.extend(trace.degraded)
        yield gateway_pb2.AnswerStreamResponse(done=gateway_pb2.AnswerResponse(
            answer=text, mode=mode, citations=citations, search=search,
            invalid_citations_removed=removed, fences_removed=fences,
        ))

    async def answer_events(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline) -> AsyncIterator[gateway_pb2.AnswerStreamResponse]:
        """Fallback chain, then generation: stage events, answer pieces, and
        a final ``done`` event whose answer says which strategy answered."""
        chosen = _Chosen()
        async for event in self.chain(query, top_k, rerank, deadline, chosen):
            yield event
        async for event in self.generate(query, chosen.outcome, deadline):
            if event.HasField("done"):
                event.done.strategy = STRATEGY_ENUM.get(chosen.strategy, gateway_pb2.FALLBACK_STRATEGY_UNSPECIFIED)
                event.done.attempts.extend(chosen.attempts)
                ANSWER_STRATEGY.labels(chosen.strategy or "none").inc()
            yield event

    async def answer(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline) -> gateway_pb2.AnswerResponse:
        """The final answer of ``answer_events``."""
        final = gateway_pb2.AnswerResponse()
        async for event in self.answer_events(query, top_k, rerank, deadline):
            if event.HasField("done"):
                final = event.done
        return final

    # ---- deep retrieval ---------------------------------------------------
    async def deep_search(self, query: str, top_k: int, max_iterations: int, k: int, threshold: float, deadline: Deadline) -> gateway_pb2.DeepSearchResponse:
        """MetaSearch's loop: retrieve with this round's queries, partial
        answer, LLM sub-queries scored against the question, the best ``k``
        next round; stop on the growth-rate rule (``deep.should_stop``);
        final synthesis over all gathered evidence (fused with RRF and
        packed under the usual quotas)."""
        s = self.s
        response = gateway_pb2.DeepSearchResponse()
        known: list[str] = []
        lists: list[fuser_pb2.CandidateList] = []
        asked = {query}
        queries = [query]
        stop_reason = ""
        for number in range(1, max_iterations + 1):
            started = time.perf_counter()
            DEEP_ITERATIONS.inc()
            outcomes = []
            for q in queries:  # sequential: the services share the CPU
                try:
                    outcomes.append(await self.p.search(q, top_k, None, deadline))
                except grpc.aio.AioRpcError as err:
                    if err.code() == grpc.StatusCode.INVALID_ARGUMENT and number == 1:
                        raise
                    log.warning("deep search: query %r failed: %s", q, _describe(err))
            found = [c.id for o in outcomes for c in o.response.results]
            fresh = deep.new_ids(found, known)
            rate = deep.growth_rate(len(fresh), len(known))
            iteration = gateway_pb2.DeepIteration(number=number, queries=queries, new_chunk_ids=fresh, known_chunks=len(known), growth_rate=rate)
            known.extend(fresh)
            for i, o in enumerate(outcomes):
                lists.append(fuser_pb2.CandidateList(producer=f"deep.{number}.{i}", candidates=o.response.results))
            partial_context = "\n".join(o.response.context for o in outcomes)[: s.deep_partial_context_chars]
            decision = deep.should_stop(number, rate, max_iterations, threshold)
            if not decision.stop:
                iteration.partial_answer = await self._partial_answer(query, partial_context, outcomes, deadline)
                try:
                    reply = await self._rewrite(expander_pb2.REWRITE_KIND_SUB_QUERIES, query, deadline.left(s.strategy_timeouts.get("sub_queries", 30.0)),
                                                context=iteration.partial_answer, n=k + 1)
                    iteration.proposed.extend(gateway_pb2.ScoredQuery(text=r.text, score=r.score) for r in reply.rewrites)
                except grpc.aio.AioRpcError as err:
                    log.warning("deep search: sub-queries failed: %s", _describe(err))
                queries = deep.next_queries(((p.text, p.score) for p in iteration.proposed), asked, k)
                asked.update(queries)
                decision = deep.should_stop(number, rate, max_iterations, threshold, has_sub_queries=bool(queries))
            iteration.duration_ms = (time.perf_counter() - started) * 1000
            response.iterations.append(iteration)
            if decision.stop:
                stop_reason = decision.reason
                break
        response.stop_reason = stop_reason
        response.evidence_ids.extend(known)
        trace = Trace()
        outcome = await self._fuse(query, lists, top_k, deadline, trace, gateway_pb2.QueryInfo(normalized_query=query))
        async for event in self.generate(query, outcome, deadline):
            if event.HasField("done"):
                response.answer.CopyFrom(event.done)
        return response

    async def _partial_answer(self, query: str, context: str, outcomes: list[SearchOutcome], deadline: Deadline) -> str:
        """A short answer over one iteration's evidence (LLM, else extractive)."""
        if self.llm.enabled and context:
            try:
                raw = await self.llm.complete(generation.build_messages(query, context), self.s.deep_partial_max_tokens,
                                              deadline.left(self.s.llm_timeout), purpose="partial_answer")
                return generation.clean_answer(raw, 10**6).text
            except LlmError as err:
                log.warning("deep search: partial answer failed: %s", err)
        texts = [t for o in outcomes for t in o.cited_texts]
        return generation.extractive_answer(texts, max_sources=2).split("\n", 1)[-1] if texts else ""
