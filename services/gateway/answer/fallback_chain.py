"""The self-healing fallback chain (MarxSphere reasonWithFallback,
the MarxSphere design (docs/references.md) section 2): standard ->
expanded query -> HyDE passage -> query + entity names -> fast path, each
under its own timeout, until a strategy's retrieval is good enough to
answer from. The rules (order, evidence, verdict) are ``fallback``; this
module runs them.

Abstention (``abstention``, when enabled): the first retrieval made with
the question as asked (standard, else fast path) decides whether the
corpus answers the question at all; when it does not, the chain stops
there and ``Chosen.decision`` says so (rewritten queries are not asked:
their scores measure the rewrite, not the question). When no strategy
passes, the best retrieval seen is judged the same way before it answers
("best available")."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc
from prometheus_client import Counter

import domains
from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.common import names
from services.common.cross_lingual import translation_from_message
from services.common.errors import DownstreamError
from services.gateway.answer import abstention
from services.gateway.answer import fallback_rules
from services.gateway.answer import named_codes, small_talk
from services.gateway.downstream.interfaces import Expander
from services.gateway.config import GatewaySettings
from services.gateway.search.fuse_request import Retrieval
from services.gateway.downstream.guard import DEGRADED, OK, SKIPPED, Deadline
from services.gateway.search.scope import DEFAULT_SCOPE, Scope
from services.gateway.search.pipeline import SearchFlow

FALLBACK_ATTEMPTS = Counter(
    "graphmesh_fallback_attempts_total",
    "Fallback-chain strategies tried, by outcome (answered, passed_over, skipped) and reason kind.",
    ("strategy", "outcome", "reason"),
)
STRATEGY_ENUM = {
    fallback_rules.STANDARD: gateway_pb2.FALLBACK_STRATEGY_STANDARD,
    fallback_rules.EXPANDED_QUERY: gateway_pb2.FALLBACK_STRATEGY_EXPANDED_QUERY,
    fallback_rules.HYDE: gateway_pb2.FALLBACK_STRATEGY_HYDE,
    fallback_rules.ENTITY_NAMES: gateway_pb2.FALLBACK_STRATEGY_ENTITY_NAMES,
    fallback_rules.FAST_PATH: gateway_pb2.FALLBACK_STRATEGY_FAST_PATH,
}
#: Codes of a failed full-pipeline strategy that skip the later ones: the
#: retrievers are down, so only the fast path can still answer.
_RETRIEVERS_DOWN = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
#: Results every strategy searches for, whatever the request's top_k below it: the no-answer
#: rule reads the first ten results (its fits were made on searches of top_k 10:
#: bench/abstention_fit.py), so asking for five must not change whether a question is answered
#: (a fresh user's 试用期多长？ was refused at top_k 5, answered at 10). The answer is then built
#: from the first top_k of them (``handlers.first_results``).
JUDGED_RESULTS = 10


class _Skip(Exception):
    """A strategy that cannot run (nothing to retrieve with)."""


@dataclass
class Chosen:
    """The retrieval the answer is built on, and every strategy tried."""

    retrieval: Retrieval | None = None
    strategy: str = ""
    attempts: list[gateway_pb2.StrategyAttempt] = field(default_factory=list)
    #: The abstention decision (None when abstention is off) and the
    #: retrieval it was taken on (its results are the nearest sources).
    decision: abstention.Decision | None = None
    evidence: Retrieval | None = None

    @property
    def abstained(self) -> bool:
        """True when the evidence does not answer the question."""
        return self.decision is not None and not self.decision.answerable


def stage_event(stage: str, duration_ms: float = 0.0, status: int = OK, detail: str = "") -> gateway_pb2.AnswerStreamResponse:
    """An AnswerStream event saying ``stage`` finished."""
    return gateway_pb2.AnswerStreamResponse(
        stage=types_pb2.StageTiming(stage=stage, duration_ms=duration_ms, status=status, detail=detail))


class FallbackChain:
    """Runs the strategies of ``settings.fallback_strategies`` in reference
    order over ``search`` (full pipeline and fast path) and the expander's
    rewrites."""

    def __init__(self, settings: GatewaySettings, search: SearchFlow, expander: Expander) -> None:
        self.settings = settings
        self.search = search
        self.expander = expander

    async def run(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline,
                  chosen: Chosen, scope: Scope = DEFAULT_SCOPE) -> AsyncIterator[gateway_pb2.AnswerStreamResponse]:
        """Tries strategies until one's retrieval is accepted; fills
        ``chosen`` (the best retrieval seen when none is accepted, marked
        "best available") and yields stage events as each finishes.

        Raises:
            DownstreamError: the standard strategy found the query invalid;
                or no strategy got any retrieval because the retrievers
                were down (UNAVAILABLE / DEADLINE_EXCEEDED, like Search) or
                every strategy ran out of the request's time
                (DEADLINE_EXCEEDED): an answer saying "nothing found" would
                misreport an outage or a deadline.
        """
        s = self.settings
        down: DownstreamError | None = None
        timed_out = False
        retrieved = False
        documents_down = True  # every retrieval so far had the document store (retriever_pg) down
        names_seen: list[str] = []
        best: tuple[float, Retrieval, str] | None = None
        first: Retrieval | None = None  # the first retrieval made, kept for its notes when none finds anything
        skip_full = ""
        for strategy in [x for x in fallback_rules.ORDER if x in s.fallback_strategies]:
            started = time.perf_counter()
            attempt = gateway_pb2.StrategyAttempt(strategy=STRATEGY_ENUM[strategy])
            if strategy in fallback_rules.FULL_PIPELINE and skip_full:
                attempt.reason = f"skipped: {skip_full}"
                chosen.attempts.append(attempt)
                FALLBACK_ATTEMPTS.labels(strategy, "skipped", "service_down").inc()
                yield stage_event(names.strategy_stage(strategy), 0.0, SKIPPED, attempt.reason)
                continue
            retrieval = None
            try:
                retrieval = await self._attempt(strategy, query, names_seen, max(top_k, JUDGED_RESULTS), rerank, deadline,
                                                attempt, scope)
            except _Skip as skip:
                attempt.reason = f"skipped: {skip}"
            except asyncio.TimeoutError:
                attempt.reason = "timed out"
                timed_out = True
            except DownstreamError as err:
                if err.code == grpc.StatusCode.INVALID_ARGUMENT and strategy == fallback_rules.STANDARD:
                    raise
                attempt.reason = str(err)
                if err.code in _RETRIEVERS_DOWN:
                    down = err
                if strategy in fallback_rules.FULL_PIPELINE and err.code in _RETRIEVERS_DOWN:
                    skip_full = f"{err.service} unavailable"
            attempt.duration_ms = (time.perf_counter() - started) * 1000
            if retrieval is not None:
                retrieved = True
                documents_down &= "retriever_pg" in retrieval.response.degraded
                first = first or retrieval
                for timing in retrieval.response.timings:
                    yield gateway_pb2.AnswerStreamResponse(stage=timing)
                results = retrieval.response.results
                attempt.results = len(results)
                attempt.evidence_score = fallback_rules.evidence_score(results)
                verdict = fallback_rules.judge(len(results), attempt.evidence_score, s.min_evidence_score, retrieval.response.degraded)
                for cand in results:
                    names_seen.extend([cand.title, *cand.heading_path])
                if results and (best is None or attempt.evidence_score > best[0]):
                    best = (attempt.evidence_score, retrieval, strategy)
                if self._decide(strategy, retrieval, chosen) is False:
                    attempt.reason = chosen.decision.reason
                    chosen.strategy = strategy
                    chosen.attempts.append(attempt)
                    FALLBACK_ATTEMPTS.labels(strategy, "abstained", "low_evidence").inc()
                    yield stage_event(names.strategy_stage(strategy), attempt.duration_ms, OK, "abstained")
                    return
                if verdict.accepted:
                    attempt.answered = True
                    if chosen.decision is not None:  # why an answer below the threshold goes ahead, or ""
                        attempt.reason = chosen.decision.reason
                    chosen.retrieval, chosen.strategy = retrieval, strategy
                    chosen.attempts.append(attempt)
                    FALLBACK_ATTEMPTS.labels(strategy, "answered", "").inc()
                    yield stage_event(names.strategy_stage(strategy), attempt.duration_ms, OK, "answered")
                    return
                attempt.reason = verdict.reason
                if strategy in fallback_rules.FULL_PIPELINE and "unavailable" in verdict.reason:
                    skip_full = verdict.reason
            chosen.attempts.append(attempt)
            outcome = "skipped" if attempt.reason.startswith("skipped") else "passed_over"
            FALLBACK_ATTEMPTS.labels(strategy, outcome, fallback_rules.reason_kind(attempt.reason)).inc()
            yield stage_event(names.strategy_stage(strategy), attempt.duration_ms,
                              SKIPPED if outcome == "skipped" else DEGRADED, attempt.reason)
            if deadline.expired:
                break
        if best is not None:
            if chosen.decision is None and self.settings.abstention.enabled:
                self._decide("", best[1], chosen, force=True)
            if chosen.abstained:
                chosen.strategy = best[2]
                return
            _answer_with_best(chosen, *best)
        elif not retrieved and down is not None:
            raise down
        elif retrieved and documents_down:
            # the graph alone answered, with nothing: the documents were never searched, so no abstention
            raise DownstreamError("retriever_pg", grpc.StatusCode.UNAVAILABLE,
                                  "the document store (retriever_pg) is unavailable and nothing else found evidence; retry later")
        elif not retrieved and timed_out:
            # an abstention would tell the caller the corpus lacks the answer when only the time ran out
            raise DownstreamError("retrievers", grpc.StatusCode.DEADLINE_EXCEEDED,
                                  "no retrieval finished within the request's deadline; retry with a longer one")
        elif self.settings.abstention.enabled:
            # a searched collection no store holds, or filters nothing matches, is why nothing came back: say so
            notes = [t.detail for t in (first.response.timings if first else ())
                     if t.stage in names.SCOPE_NOTE_STAGES and t.status == SKIPPED and t.detail]
            chosen.retrieval = first
            # a note is why nothing came back (a collection name mistyped): the answer leads with it
            chosen.decision = abstention.Decision(False, 0.0, self.settings.abstention.threshold,
                                                  "; ".join(notes or ["no evidence retrieved"]), out_of_scope=bool(notes),
                                                  scope_note=bool(notes))

    def _decide(self, strategy: str, retrieval: Retrieval, chosen: Chosen, force: bool = False) -> bool | None:
        """Takes the abstention decision on ``retrieval`` when it is the
        first usable one made with the question as asked (or ``force``);
        returns whether it answers, None when no decision was taken."""
        s = self.settings
        results = retrieval.response.results
        down = any(d in fallback_rules.REQUIRED_RETRIEVERS for d in retrieval.response.degraded)
        if not s.abstention.enabled or chosen.decision is not None or not results:
            return None
        if not force and (strategy not in fallback_rules.AS_ASKED or down):
            return None
        info = retrieval.response.query_info
        packs = [domains.PACKS.get(p, domains.GENERIC) for p in info.domain_packs]
        outside = [pack.out_of_scope(info.normalized_query) for pack in packs]
        # nothing is asked (a greeting), every pack searched says its corpora cannot hold the answer, or the question
        # names a code nothing found holds
        chatted = small_talk.reason(info.normalized_query)
        scope = chatted or (
            outside[0] if packs and all(outside) else named_codes.not_found_reason(info.normalized_query, results))
        if scope:
            chosen.decision = abstention.Decision(False, 0.0, s.abstention.threshold, scope, out_of_scope=True,
                                                  small_talk=bool(chatted))
            chosen.evidence = retrieval
            return False
        fits = abstention.pack_fits(packs)
        if not fits:
            return None  # no rule was fitted on these collections' corpora: it does not judge them
        script = (info.normalized_query, abstention.evidence_text(results), abstention.first_text(results))
        translated = translation_from_message(info.translation)[1] \
            if abstention.reads_translation(info.embedding_model, fits, *script) else []
        sig = abstention.signals(info.keywords, results, translated)
        vector_ran = bool(info.embedding_model) and "retriever_pg" not in retrieval.response.degraded
        chosen.decision = abstention.decide(sig, fits, s.abstention.threshold, info.embedding_model, vector_ran, *script)
        chosen.evidence = retrieval
        return chosen.decision.answerable

    async def _attempt(self, strategy: str, query: str, names_seen: list[str], top_k: int, rerank: bool | None,
                       deadline: Deadline, attempt: gateway_pb2.StrategyAttempt, scope: Scope = DEFAULT_SCOPE) -> Retrieval:
        """One strategy's retrieval, within its own timeout."""
        timeout = deadline.left(self.settings.strategy_timeouts.get(strategy, 15.0))
        sub_deadline = Deadline(timeout)
        text = await self._strategy_query(strategy, query, names_seen, sub_deadline, scope)
        attempt.query = text
        if strategy == fallback_rules.FAST_PATH:
            work = self.search.fast_search(text, top_k, sub_deadline, scope)
        else:
            work = self.search.search(text, top_k, rerank, sub_deadline, scope=scope)
        return await asyncio.wait_for(work, timeout=sub_deadline.left())

    async def _strategy_query(self, strategy: str, query: str, names_seen: list[str], deadline: Deadline,
                              scope: Scope = DEFAULT_SCOPE) -> str:
        """The text a strategy retrieves with (rewrites asked with the
        domain packs of the collections in ``scope``)."""
        if strategy in (fallback_rules.STANDARD, fallback_rules.FAST_PATH):
            return query
        if strategy == fallback_rules.ENTITY_NAMES:
            text = fallback_rules.entity_names_query(query, names_seen)
            if text == query:
                raise _Skip("no entity names seen")
            return text
        kind = expander_pb2.REWRITE_KIND_EXPANDED_QUERY if strategy == fallback_rules.EXPANDED_QUERY else expander_pb2.REWRITE_KIND_HYDE
        timeout = deadline.left()
        packs = await self.search.packs.for_search(scope.collections, deadline)
        request = expander_pb2.RewriteRequest(query=query, kind=kind, timeout_seconds=max(0.5, timeout - 0.2),
                                              domain_packs=packs)
        reply = await self.expander.rewrite(request, timeout)
        if not reply.rewrites:
            missing = "no LLM for HyDE" if strategy == fallback_rules.HYDE else "no expansion"
            raise _Skip(missing + (f" ({reply.fallback_reason})" if reply.fallback_reason else ""))
        return reply.rewrites[0].text


def _answer_with_best(chosen: Chosen, _score: float, retrieval: Retrieval, strategy: str) -> None:
    """Nothing passed: answer from the best retrieval seen, and say so."""
    chosen.retrieval, chosen.strategy = retrieval, strategy
    for attempt in chosen.attempts:
        if attempt.strategy == STRATEGY_ENUM[strategy]:
            attempt.answered = True
            attempt.reason = f"best available ({attempt.reason})"
            break
