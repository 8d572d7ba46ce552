"""Answer generation over a retrieval: the LLM answer grounded in the packed,
numbered context (streamed, cleaned, citations verified and resolved), or an
extractive answer (labelled so) when no LLM is configured or it fails; and
the explicit no-answer when the evidence does not answer the question.

Every [n] of the final answer is checked against source n
(services.common.citation_check): kept, re-attributed to the source that
supports the sentence, or removed with the sentence listed as unsupported.
Streamed tokens are the model's raw text; the ``done`` answer is the
verified one."""
from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

from prometheus_client import Counter

from graphmesh.gateway.v1 import gateway_pb2
from services.common import names
from services.common.llm import LlmError
import domains
from services.common import citation_check
from services.common.cross_lingual import translation_from_message
from services.common.packed_context import source_label
from services.common.text import citation_numbers
from services.gateway.answer import abstention
from services.gateway.answer import extractive, grounding, small_talk
from services.gateway.answer.citation_grammar import citation_grammar
from services.gateway.answer.cross_script import other_script_sources, piece_similarity, similarity_weight
from services.gateway.answer.source_caveats import caveat_note, caveat_of
from services.gateway.downstream.interfaces import Expander, Llm
from services.gateway.config import GatewaySettings
from services.gateway.search.fuse_request import Retrieval
from services.gateway.downstream.guard import SKIPPED, Deadline, Trace

log = logging.getLogger("graphmesh.gateway.generate")

ANSWER_CLEANUP = Counter(
    "graphmesh_answer_cleanup_total", "Items removed from LLM answers: invalid_citation, fence.", ("kind",)
)
CITATION_CHECKS = Counter(
    "graphmesh_answer_citation_checks_total",
    "Citation checks of answer sentences by outcome: supported, reattributed, unsupported.", ("outcome",)
)
NO_EVIDENCE = "未检索到相关资料。"
#: Nearest sources listed with a no-answer.
NEAREST_SOURCES = 3


class Generator:
    """Writes answers from retrievals.

    Args:
        settings: LLM timeout and answer length.
        llm: the LLM client (``enabled`` False = extractive answers).
        expander: embeds the extractive answer's pieces for a question in
            another script than its sources (``cross_script``); None: words only.
    """

    def __init__(self, settings: GatewaySettings, llm: Llm, expander: Expander | None = None) -> None:
        self.settings = settings
        self.llm = llm
        self.expander = expander

    async def _extractive(self, query: str, retrieval: Retrieval, deadline: Deadline) -> str:
        """The extractive answer over ``retrieval``'s packed sources, with the
        pieces' dense similarity (``cross_script``: weight 1 across scripts, the
        gateway's ``quote_similarity_weight`` within one)."""
        texts = packed(retrieval, drop_cut_clause=True)
        weight = similarity_weight(query, texts, self.settings.quote_similarity_weight)
        similarity = await piece_similarity(self.expander, query, texts, deadline, self.settings.deadlines.expand,
                                            self.settings.ingest.embed_batch, weight)
        return extractive.extractive_answer(texts, query, similarity=similarity, similarity_weight=weight,
                                            similarity_ranks_only=not other_script_sources(query, texts))

    async def generate(self, query: str, retrieval: Retrieval | None, deadline: Deadline,
                       max_tokens: int | None = None) -> AsyncIterator[gateway_pb2.AnswerStreamResponse]:
        """Yields answer pieces from the LLM as they arrive, the "generate"
        stage event, then one ``done`` event with the cleaned answer, its
        citations and the search it was built from. Extractive when there
        is no LLM or it fails (then "llm" is in ``search.degraded``)."""
        s = self.settings
        trace = Trace()
        started = time.perf_counter()
        mode = gateway_pb2.ANSWER_MODE_EXTRACTIVE
        text, removed, fences = "", 0, 0
        cited_ids = retrieval.cited_ids if retrieval else []
        if self.llm.enabled and cited_ids:
            pieces: list[str] = []
            try:
                prompt = domains.answer_prompt(list(retrieval.response.query_info.domain_packs))
                shown = min(len(cited_ids), s.llm.max_sources or len(cited_ids))
                shown_context = grounding.first_sources(retrieval.response.context, shown, packed_labels(retrieval))
                messages = grounding.build_messages(query, shown_context, prompt, worked_example=s.llm.worked_example)
                extra = {"grammar": citation_grammar(shown)} if s.llm.citation_grammar else None
                first_token = None
                async for piece in self.llm.stream(messages, max_tokens or s.llm.max_tokens, deadline.left(s.llm.timeout),
                                                   purpose="answer", extra=extra):
                    if first_token is None:
                        first_token = time.perf_counter()
                    pieces.append(piece)
                    yield gateway_pb2.AnswerStreamResponse(token=piece)
                cleaned = grounding.clean_answer("".join(pieces), shown)
                text, removed, fences = cleaned.text, cleaned.invalid_citations_removed, cleaned.fences_removed
                ANSWER_CLEANUP.labels("invalid_citation").inc(removed)
                ANSWER_CLEANUP.labels("fence").inc(fences)
                if text:
                    mode = gateway_pb2.ANSWER_MODE_LLM
                    trace.record(names.STAGE_GENERATE, started,
                                 detail=f"first token after {(first_token - started) * 1000:.0f} ms" if first_token else "")
                else:
                    trace.degrade("llm", names.STAGE_GENERATE, started, "empty LLM answer")
            except LlmError as err:
                log.warning("LLM generation failed: %s", err)
                trace.degrade("llm", names.STAGE_GENERATE, started, err.reason)
        if mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE:
            text = await self._extractive(query, retrieval, deadline) if cited_ids else NO_EVIDENCE
            if not trace.timings:
                detail = "no LLM configured; extractive answer" if not self.llm.enabled else "no evidence"
                trace.record(names.STAGE_GENERATE, started, SKIPPED, detail)
        checks: list[citation_check.Check] = []
        if cited_ids:
            label = extractive.extractive_label(query) if mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE else ""
            rules = domains.citation_rules(list(retrieval.response.query_info.domain_packs))
            translation = translation_from_message(retrieval.response.query_info.translation)[1]
            verified = citation_check.verify(text, sources(retrieval), query, skip_prefix=label, rules=rules,
                                             translation=translation)
            text, checks = verified.text, verified.checks
            if mode == gateway_pb2.ANSWER_MODE_LLM and verified.removed and not citation_numbers(text):
                # nothing the sources support is left of the LLM's answer: quote them instead
                log.info("LLM answer unsupported by its sources (%d sentences removed); extractive answer",
                         len(verified.removed))
                mode = gateway_pb2.ANSWER_MODE_EXTRACTIVE
                label = extractive.extractive_label(query)
                quoted = citation_check.verify(await self._extractive(query, retrieval, deadline),
                                               sources(retrieval), query, skip_prefix=label, rules=rules,
                                               translation=translation)
                text, checks = quoted.text, checks + quoted.checks
                trace.timings[-1].detail = (trace.timings[-1].detail + "; " if trace.timings[-1].detail else "") + \
                    "LLM answer unsupported by the sources: extractive answer"
            for check in checks:
                CITATION_CHECKS.labels(check.outcome).inc()
        citations = _citations(text, retrieval)
        note = caveat_note(query, {c.number: c.caveat for c in citations})
        if note:
            text = f"{text}\n{note}"
        yield gateway_pb2.AnswerStreamResponse(stage=trace.timings[-1])
        search = gateway_pb2.SearchResponse()
        if retrieval is not None:
            search.CopyFrom(retrieval.response)
        search.timings.extend(trace.timings)
        search.degraded.extend(trace.degraded)
        unsupported = [gateway_pb2.UnsupportedSentence(sentence=c.sentence, cited=c.cited, reason=c.reason)
                       for c in checks if c.outcome == citation_check.UNSUPPORTED]
        yield gateway_pb2.AnswerStreamResponse(done=gateway_pb2.AnswerResponse(
            answer=text, mode=mode, citations=citations, search=search,
            invalid_citations_removed=removed, fences_removed=fences,
            unsupported_sentences=unsupported, unsupported_count=len(unsupported),
            citation_checks=[gateway_pb2.CitationCheck(sentence=c.sentence, cited=c.cited, final=c.final,
                                                       outcome=_OUTCOME[c.outcome], support=c.support,
                                                       relevance=c.relevance, off_topic=c.off_topic)
                             for c in checks],
            off_topic_count=sum(c.off_topic for c in checks),
        ))

    async def partial_answer(self, query: str, context: str, texts: list[str], deadline: Deadline) -> str:
        """A short answer over one DeepSearch iteration's evidence: the LLM's
        over ``context``, else the leading sentences of ``texts``."""
        s = self.settings
        if self.llm.enabled and context:
            try:
                raw = await self.llm.complete(grounding.build_messages(query, context), s.deep.partial_max_tokens,
                                              deadline.left(s.llm.timeout), purpose="partial_answer")
                return grounding.clean_answer(raw, 10**6).text
            except LlmError as err:
                log.warning("deep search: partial answer failed: %s", err)
        quoted = extractive.extractive_answer(texts, max_sources=2).split("\n", 1) if texts else []
        return quoted[1] if len(quoted) > 1 else ""  # the label line alone quotes nothing


_OUTCOME = {
    citation_check.SUPPORTED: gateway_pb2.CITATION_OUTCOME_SUPPORTED,
    citation_check.REATTRIBUTED: gateway_pb2.CITATION_OUTCOME_REATTRIBUTED,
    citation_check.UNSUPPORTED: gateway_pb2.CITATION_OUTCOME_UNSUPPORTED,
}


def packed_labels(retrieval: Retrieval) -> list[str] | None:
    """The header label of each packed source in citation order, None when
    a cited candidate is not among the results."""
    cands = [retrieval.by_id.get(cid) for cid in retrieval.cited_ids]
    return None if any(c is None for c in cands) else [source_label(c) for c in cands]


def packed(retrieval: Retrieval, drop_cut_clause: bool = False) -> list[str]:
    """Text of each packed source as the context holds it (cut where the
    fuser cut it; ``grounding.packed_texts``), else the candidates' whole texts."""
    return grounding.packed_texts(retrieval.response.context, len(retrieval.cited_ids),
                                  packed_labels(retrieval), drop_cut_clause) or retrieval.cited_texts


def sources(retrieval: Retrieval) -> list[str]:
    """Label and packed text of each source, in citation order ([n] is item
    n-1): what the citation verifier checks a sentence against (what the
    reader and the LLM were shown)."""
    texts = packed(retrieval)
    out = []
    for cid, text in zip(retrieval.cited_ids, texts):
        cand = retrieval.by_id.get(cid)
        out.append(f"{source_label(cand)}\n{text}" if cand is not None else text)
    return out


def abstained_response(query: str, retrieval: Retrieval | None, decision: abstention.Decision,
                       trace_timings=()) -> gateway_pb2.AnswerResponse:
    """The explicit no-answer: a short message in the question's language (with, when the answerability rule
    said no rather than a scope rule, the first result's closest piece: ``extractive.closest_quote``),
    no citations, the first NEAREST_SOURCES results of ``retrieval`` listed
    as insufficient, the answerability and its threshold, and the search."""
    search = gateway_pb2.SearchResponse()
    nearest = []
    if decision.small_talk:  # nothing was asked: answered in kind, no sources (a trial's "你好" got a source list)
        if retrieval is not None:
            search.CopyFrom(retrieval.response)
        search.timings.extend(trace_timings)
        return gateway_pb2.AnswerResponse(answer=small_talk.reply(query) or decision.reason,
                                          mode=gateway_pb2.ANSWER_MODE_ABSTAINED, search=search,
                                          answerability=decision.answerability, answerability_threshold=decision.threshold)
    if retrieval is not None:
        search.CopyFrom(retrieval.response)
        packs = list(retrieval.response.query_info.domain_packs)
        for number, cand in enumerate(retrieval.response.results[:NEAREST_SOURCES], start=1):
            nearest.append(gateway_pb2.Citation(number=number, candidate_id=cand.id, document_id=cand.document_id,
                                                label=source_label(cand), caveat=caveat_of(cand, packs)))
    search.timings.extend(trace_timings)
    # the rule's no, not a scope's: the first source's closest piece is shown, marked as not an answer
    closest = extractive.closest_quote(retrieval.response.results[0].text, query) \
        if nearest and not decision.out_of_scope and retrieval is not None else ""
    return gateway_pb2.AnswerResponse(
        answer=abstention.no_answer_message(query, decision.reason if decision.out_of_scope else "", nearest=bool(nearest),
                                            scope_note=decision.scope_note, closest=closest),
        mode=gateway_pb2.ANSWER_MODE_ABSTAINED, search=search,
        insufficient_sources=nearest, answerability=decision.answerability,
        answerability_threshold=decision.threshold,
    )


def _citations(text: str, retrieval: Retrieval | None) -> list[gateway_pb2.Citation]:
    """The sources the answer cites, in number order: citation [n] is the
    n-th packed candidate, with its pack's caveat (``source_caveats``)."""
    if retrieval is None:
        return []
    numbers = set(citation_numbers(text))
    packs = list(retrieval.response.query_info.domain_packs)
    citations = []
    for number, cid in enumerate(retrieval.cited_ids, start=1):
        if number in numbers and cid in retrieval.by_id:
            cand = retrieval.by_id[cid]
            citations.append(gateway_pb2.Citation(number=number, candidate_id=cid, document_id=cand.document_id,
                                                  label=source_label(cand), caveat=caveat_of(cand, packs)))
    return citations
