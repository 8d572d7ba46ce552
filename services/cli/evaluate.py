"""``graphmesh eval``: runs a labelled query set through the gateway, scores
it, and saves the run as one JSON artifact; ``graphmesh eval compare`` diffs
two artifacts query by query.

Dataset: JSONL of {"query", "gold": [ids]} with optional "id", "reference"
(or "reference_answer"/"answer": a reference answer) and "category". A result
counts as its document id (or its id), or as its title when the title is a
gold label (entity sets label entities by name); ranks count distinct keys.
recall@k is "any gold in the top k" (shared/data/README.md), so top-1 equals
recall@1.

Artifact (JSON, schema "graphmesh.eval.run/1"): git commit and dirty flag,
config and its hash, dataset path/hash/size, per-query rows (rank of the
first gold, strategy, degraded services, latency, the top 10, judge metrics
with --answers), totals, timings.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import os
import re
import statistics
import subprocess
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc

import domains

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from graphmesh.judge.v1 import judge_pb2, judge_pb2_grpc
from services.cli.significance import compare_ranks
from services.common.clients import channel
from services.common.packed_context import source_label, split_blocks
from services.judge import core as metrics
from services.judge import text_rules

SCHEMA = "graphmesh.eval.run/1"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_RUNS_DIR = REPO_ROOT / "bench" / "results" / "runs"
#: Environment settings that do not change behaviour (or are secret) and
#: stay out of the recorded config and its hash.
_ENV_SKIP = re.compile(r"_(PORT|ADDR|API_KEY|PASSWORD|USER)$|^GRAPHMESH_HOME$")


@dataclass
class QueryRow:
    """Per-query outcome (latency in milliseconds; first_gold_rank 1-based,
    None when no gold is in the results). ``judge_parts``: for each metric
    an LLM judged, {"rule": rule score or None, "llm": median, "rounds":
    [score per round]}; ``judge_ms``: the Judge call's wall time;
    ``contexts`` / ``context_labels``: the packed sources the judge was
    given (text, and title with headings); ``raw_answer`` /
    ``first_token_ms``: see run_queries(stream=True)."""

    id: str
    query: str
    gold: list[str]
    ranked: list[str]
    first_gold_rank: int | None
    latency_ms: float
    degraded: list[str]
    strategy: str = ""
    category: str = ""
    error: str = ""
    stages_ms: dict[str, float] = field(default_factory=dict)
    judge: dict[str, float | None] = field(default_factory=dict)
    answer_mode: str = ""
    question_type: str = ""
    profile: str = ""
    answerability: float | None = None
    citations: dict[str, int] = field(default_factory=dict)
    reference: dict[str, float | None] = field(default_factory=dict)
    unsupported: int = 0
    supports: list[float] = field(default_factory=list)
    answer: str = ""
    checks: list[dict] = field(default_factory=list)
    answer_quotes_gold: bool | None = None
    judge_parts: dict[str, dict] = field(default_factory=dict)
    judge_ms: float | None = None
    contexts: list[str] = field(default_factory=list)
    context_labels: list[str] = field(default_factory=list)
    raw_answer: str = ""
    first_token_ms: float | None = None
    cited_ids: list[str] = field(default_factory=list)
    gold_text_unfound: bool = False


def load_dataset(path: Path, limit: int | None = None) -> list[dict]:
    """Reads the JSONL dataset (at most ``limit`` rows; UTF-8, with or without a BOM). A row without an
    "id" takes its line number.

    Raises:
        ValueError: naming the file and line: a line that is not JSON, or not a JSON object with a
            non-empty "query"; a "gold" that is not a list of strings (one id written bare, "gold": "a.docx", is
            read as ["a.docx"]); an "id" that an earlier line has (its questions would be counted twice,
            and `eval compare` would keep one); no question at all.
    """
    rows = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8-sig") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not JSON ({err.msg}, column {err.colno})") from None
            if not isinstance(row, dict) or not str(row.get("query", "")).strip():
                raise ValueError(f"{path}:{number}: expected a JSON object with a non-empty \"query\"")
            if isinstance(row.get("gold"), str):  # one gold id written bare: its characters were read as ids
                row["gold"] = [row["gold"]] if row["gold"] else []
            if "gold" in row and not (isinstance(row["gold"], list) and
                                      all(isinstance(g, (str, int)) and not isinstance(g, bool) for g in row["gold"])):
                raise ValueError(f"{path}:{number}: \"gold\" must be a list of document ids (strings or numbers)")
            row.setdefault("id", str(number))
            key = str(row["id"])
            if key in seen:
                raise ValueError(f"{path}:{number}: id {key!r} is also the id of line {seen[key]}")
            seen[key] = number
            rows.append(row)
            if limit and len(rows) >= limit:
                break
    if not rows:
        raise ValueError(f"{path}: no question in it (one JSON object per line, each with a \"query\")")
    return rows


def unlabelled(rows: list[dict]) -> int:
    """How many of ``rows`` have no gold: neither "gold" ids nor "gold_text"
    (an out-of-scope set; their recall and MRR count 0)."""
    return sum(1 for row in rows if not row.get("gold") and not gold_passages(row))


def reference_of(row: dict) -> str:
    """The row's reference answer, "" when none."""
    for key in ("reference", "reference_answer", "answer"):
        if isinstance(row.get(key), str):
            return row[key]
    return ""


def gold_passages(row: dict) -> list[str]:
    """The row's gold passages given as text ("gold_text": a string or a
    list), for corpora without stable ids, a Markdown table row's outer pipes
    dropped; [] when it has none."""
    value = row.get("gold_text")
    if isinstance(value, str):
        value = [value]
    # a Markdown table row copied with its outer pipes ("| 滿5年未滿10年 | 15日 |") is stored as "滿5年未滿10年 | 15日"
    return [v.strip().strip("|").strip() if v.strip().startswith("|") and v.strip().endswith("|") else v
            for v in (value or []) if isinstance(v, str) and v.strip().strip("|").strip()]


#: Dashes NFKC leaves apart (hyphen, figure dash, en and em dash, horizontal bar, minus): a PDF printed by
#: Chromium gave 8:30―17:00 (U+2015) for the source's 8:30—17:00 (U+2014), and a gold line copied from the
#: source matched nothing.
_DASHES = str.maketrans({c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63"})


def quotes_gold(reply: gateway_pb2.AnswerResponse, passages: Sequence[str]) -> bool:
    """Whether an answer (not a refusal: its closest passage, shown as no answer, does not count) holds one of
    the gold ``passages`` given as text, spacing and punctuation widths aside (``_squeeze``)."""
    return reply.mode != gateway_pb2.ANSWER_MODE_ABSTAINED and any(_squeeze(g) in _squeeze(reply.answer) for g in passages)


def _squeeze(text: str) -> str:
    """``text`` in NFKC form without whitespace, Markdown's code and bold marks (` and **), every dash a
    hyphen: a gold passage written with half-width punctuation (保价费:按声明价值的0.5%收取,最低2元) matches
    the document's full-width one, and one copied from a Markdown source (执行 `redis-cli DEL key`) the text
    parsed from it (a trial's 11 of 50 gold passages were "unfound" for their backticks)."""
    squeezed = "".join(unicodedata.normalize("NFKC", text).translate(_DASHES).split())
    return squeezed.replace("`", "").replace("**", "")


def passage_matches(gold: str, text: str, min_share: float = 0.6) -> bool:
    """Whether a result ``text`` holds the gold passage: the whole passage
    (whitespace ignored), or a common stretch of at least ``min_share`` of
    it (a passage cut across two chunks still counts for the chunk holding
    most of it) that does not end where the two say different numbers."""
    g, t = _squeeze(gold), _squeeze(text)
    if not g or not t:
        return False
    if g in t:
        return True
    from difflib import SequenceMatcher

    match = SequenceMatcher(None, g, t, autojunk=False).find_longest_match(0, len(g), 0, len(t))
    if match.size < min_share * len(g):
        return False
    # the stretch ends where the two say different numbers (会费300元 in the gold, 会费200元 in the text): another
    # passage, not a cut one (a trial's gold lines with wrong figures were scored as found at rank 1)
    before = (g[match.a - 1], t[match.b - 1]) if match.a and match.b else ("", "")
    after = (g[match.a + match.size], t[match.b + match.size]) \
        if match.a + match.size < len(g) and match.b + match.size < len(t) else ("", "")
    return not any(x.isdigit() and y.isdigit() and x != y for x, y in (before, after))


def result_keys(results, gold: set[str]) -> list[str]:
    """Distinct ranking keys of ``results``: the title when it is a gold
    label, else the document id (or the candidate id)."""
    return metrics.dedupe([c.title if c.title in gold else (c.document_id or c.id) for c in results])


def split_context(context: str, known_labels: set[str] | None = None) -> list[tuple[str, str]]:
    """(label, text) of each numbered block "[n] label\ntext" of a packed
    context, in number order. With ``known_labels`` (the labels of the
    search's results) a line opens a block only when its label is one of
    them, so a line of a document that looks like a header ("[2] Smith,
    2020" in a reference list) stays in its block; when the labels open no
    block at all, the numbers alone decide."""
    blocks = (split_blocks(context, lambda _, label: label in known_labels) if known_labels else []) \
        or split_blocks(context)
    return [(label, "\n".join(lines).strip()) for label, lines in blocks]


def result_labels(search) -> set[str]:
    """The packed-header label of each result of a SearchResponse."""
    return {source_label(c) for c in search.results}


def _strategy(reply) -> str:
    """The strategy that answered, when the gateway reports one."""
    field_descriptor = reply.DESCRIPTOR.fields_by_name.get("strategy")
    if field_descriptor is None:
        return ""
    value = getattr(reply, "strategy")
    if field_descriptor.enum_type is not None:
        return field_descriptor.enum_type.values_by_number[value].name if value in field_descriptor.enum_type.values_by_number else str(value)
    return str(value)


def _judge_request(row: dict, reply: gateway_pb2.AnswerResponse, gold: list[str], ranked: list[str], k: int,
                   by_chunk: bool = False) -> judge_pb2.JudgeRequest:
    """The judge's request for one answer; ``by_chunk``: the gold ids are
    chunk ids (gold given as text), so the packed sources and citations are
    named by chunk too, or the context and citation metrics would compare
    document ids with chunk ids and read 0."""
    search = reply.search
    label_to_doc: dict[str, str] = {}
    for c in search.results:
        label_to_doc.setdefault(source_label(c), c.id if by_chunk else (c.document_id or c.id))
    cited = {c.number: (c.candidate_id if by_chunk else c.document_id) for c in reply.citations}
    blocks = split_context(search.context, set(label_to_doc))
    ids = [cited.get(n) or label_to_doc.get(label, "") for n, (label, _) in enumerate(blocks, start=1)]
    return judge_pb2.JudgeRequest(
        question=row["query"], answer=reply.answer, ranked_ids=ranked, contexts=[t for _, t in blocks],
        context_ids=ids if all(ids) else [], gold_ids=gold, k=k, reference_answer=reference_of(row),
        timings=search.timings, context_labels=[label for label, _ in blocks],
        domain_packs=list(search.query_info.domain_packs),
    )


#: Gold id given to the judge for a question whose gold passage (given as text) no result holds: an id
#: no result has, so hit@10, recall@10, MRR and context recall read 0 for it instead of not computed.
UNRETRIEVED_GOLD = "gold-not-retrieved:"


def judged_gold(row: dict, gold: list[str], given_as_text: bool) -> list[str]:
    """The gold ids the judge is given for ``row``: ``gold`` (the ids of the
    results holding a gold passage, when the gold is ``given_as_text``); when
    a gold passage was given as text and no result holds it, one
    UNRETRIEVED_GOLD id, so the question counts 0 in the judge's rank
    metrics rather than being left out of their means (which read 1.0 over
    only the questions retrieved)."""
    if gold or not given_as_text:
        return list(gold)
    return [f"{UNRETRIEVED_GOLD}{row.get('id', row.get('query', ''))}"]

#: A sentence counts as supported by a source, for the independent check of
#: citation precision, when this share of its character bigrams occurs there
#: (the judge's faithfulness rule, text_rules.SUPPORT_THRESHOLD).
BIGRAM_SUPPORT = text_rules.SUPPORT_THRESHOLD


def _bigram_supported(sentence: str, source: str) -> bool:
    grams = text_rules.bigrams(sentence)
    total = sum(grams.values())
    return bool(total) and sum((grams & text_rules.bigrams(source)).values()) / total >= BIGRAM_SUPPORT


def citation_summary(reply: gateway_pb2.AnswerResponse) -> dict[str, int]:
    """Counts of the answer's citation checks: "marks" (checked [n] of the
    answer before verification), "supported" (kept as cited), "reattributed",
    "removed", "kept" (marks after verification), and by the independent
    bigram rule (BIGRAM_SUPPORT of the sentence's bigrams in the source):
    "bigram_before" (original marks whose source passes) and "bigram_after"
    (final marks whose source passes); "added" counts unmarked sentences
    the check gave a mark (those it removed are not marks of either kind)."""
    blocks = split_context(reply.search.context, result_labels(reply.search))
    sources = [f"{label}\n{text}" for label, text in blocks]
    out = dict.fromkeys(("marks", "supported", "reattributed", "removed", "kept", "bigram_before", "bigram_after",
                         "added"), 0)
    for check in reply.citation_checks:
        if not check.cited:  # a sentence the answer left unmarked: the check added a mark or removed it
            out["added"] += bool(check.final)
            continue
        out["marks"] += 1
        outcome = gateway_pb2.CitationOutcome.Name(check.outcome).removeprefix("CITATION_OUTCOME_").lower()
        out[{"supported": "supported", "reattributed": "reattributed"}.get(outcome, "removed")] += 1
        if 1 <= check.cited <= len(sources) and _bigram_supported(check.sentence, sources[check.cited - 1]):
            out["bigram_before"] += 1
        if check.final:
            out["kept"] += 1
            if check.final <= len(sources) and _bigram_supported(check.sentence, sources[check.final - 1]):
                out["bigram_after"] += 1
    return out


async def _gold_text_found(stub, passages: list[str], top_k: int, collections: tuple[str, ...], filters: tuple,
                           timeout: float) -> bool:
    """Whether a Search for each gold passage itself finds a result holding it: False means the line is in
    no passage the collection returns (a typo in the gold line, or text the parser changed), which a miss
    of the question alone does not tell apart from a retrieval failure. An RPC error counts as found."""
    for passage in passages:
        try:
            reply = await stub.Search(gateway_pb2.SearchRequest(query=passage[:500], top_k=max(top_k, 10),
                                                                collections=collections, filters=filters), timeout=timeout)
        except grpc.aio.AioRpcError:
            return True
        if any(passage_matches(passage, c.text) for c in reply.results):
            return True
    return False


async def run_queries(address: str, dataset: list[dict], top_k: int, concurrency: int, timeout: float,
                      answers: bool = False, judge_address: str = "",
                      disabled_stages: tuple[str, ...] = (), entities: bool = False,
                      enabled_stages: tuple[str, ...] = (), collections: tuple[str, ...] = (),
                      filters: tuple = (), stream: bool = False) -> list[QueryRow]:
    """Calls Search (Answer and then Judge with ``answers``; SearchEntities
    with ``entities``, ranking entity names) for every query, ``concurrency``
    at a time, with ``disabled_stages`` switched off and ``enabled_stages``
    on (Search only), in ``collections`` (the gateway's default when empty)
    and with the metadata ``filters`` (MetadataFilter messages; not for
    entities). With ``stream`` answers come through AnswerStream: the row
    keeps the LLM's text as it streamed (``raw_answer``, before cleaning
    and citation checks) and the time to its first token
    (``first_token_ms``). An RPC error is recorded in the row."""
    from services.cli.client import api_key_metadata

    ch = channel(address, metadata=api_key_metadata())
    stub = gateway_pb2_grpc.GatewayServiceStub(ch)
    judge_ch = channel(judge_address) if answers else None
    judge = judge_pb2_grpc.JudgeServiceStub(judge_ch) if judge_ch else None
    gate = asyncio.Semaphore(concurrency)

    async def one(row: dict) -> QueryRow:
        gold = [str(g) for g in row.get("gold", [])]
        base = QueryRow(str(row.get("id")), row["query"], gold, [], None, 0.0, [], category=str(row.get("category", "")))
        async with gate:
            started = time.perf_counter()
            try:
                if entities:
                    reply = await stub.SearchEntities(
                        gateway_pb2.SearchEntitiesRequest(query=row["query"], top_k=min(top_k, 100), collections=collections),
                        timeout=timeout)
                elif answers and stream:
                    reply, pieces = None, []
                    async for event in stub.AnswerStream(gateway_pb2.AnswerStreamRequest(
                            query=row["query"], top_k=top_k, collections=collections, filters=filters), timeout=timeout):
                        if event.HasField("token"):
                            if not pieces:
                                base.first_token_ms = round((time.perf_counter() - started) * 1000, 1)
                            pieces.append(event.token)
                        elif event.HasField("done"):
                            reply = event.done
                    if reply is None:
                        base.error = "AnswerStream ended without its done event"
                        return base
                    base.raw_answer = "".join(pieces)
                    search = reply.search
                elif answers:
                    reply = await stub.Answer(gateway_pb2.AnswerRequest(query=row["query"], top_k=top_k, collections=collections,
                                                                        filters=filters), timeout=timeout)
                    search = reply.search
                else:
                    reply = search = await stub.Search(gateway_pb2.SearchRequest(
                        query=row["query"], top_k=top_k, disabled_stages=disabled_stages, enabled_stages=enabled_stages,
                        collections=collections, filters=filters), timeout=timeout)
            except grpc.aio.AioRpcError as err:
                base.error = f"{err.code().name}: {err.details()}"
                return base
            base.latency_ms = (time.perf_counter() - started) * 1000
            if entities:
                ranked = metrics.dedupe([e.name for e in reply.entities])
                base.ranked = ranked[:10]
                base.first_gold_rank = metrics.first_gold_rank(ranked, set(gold))
                base.degraded = list(reply.degraded)
                return base
            passages = gold_passages(row)
            if passages:  # gold given as text: the matching chunks are gold, ranks count chunks
                gold = sorted({c.id for c in search.results if any(passage_matches(g, c.text) for g in passages)})
                base.gold = gold
                ranked = metrics.dedupe([c.id for c in search.results])
                if not gold:
                    base.gold_text_unfound = not await _gold_text_found(stub, passages, top_k, collections, filters, timeout)
            else:
                ranked = result_keys(search.results, set(gold))
            base.ranked = ranked[:10]
            base.first_gold_rank = metrics.first_gold_rank(ranked, set(gold))
            base.degraded = list(search.degraded)
            base.strategy = _strategy(reply) or _strategy(search)
            base.stages_ms = {t.stage: round(t.duration_ms, 2) for t in search.timings if t.duration_ms > 0}
            base.question_type = search.query_info.question_type.removeprefix("QUESTION_TYPE_")
            base.profile = search.query_info.profile
            if answers:
                base.answer_mode = gateway_pb2.AnswerMode.Name(reply.mode).removeprefix("ANSWER_MODE_").lower()
                base.answerability = round(reply.answerability, 4)
                base.citations = citation_summary(reply)
                base.cited_ids = [c.document_id for c in reply.citations]
                base.unsupported = reply.unsupported_count
                base.supports = [round(c.support, 3) for c in reply.citation_checks]
                base.answer = reply.answer
                if passages:
                    base.answer_quotes_gold = quotes_gold(reply, passages)
                base.checks = [{"sentence": c.sentence, "cited": c.cited, "final": c.final,
                                "outcome": gateway_pb2.CitationOutcome.Name(c.outcome).removeprefix("CITATION_OUTCOME_").lower(),
                                "off_topic": c.off_topic}
                               for c in reply.citation_checks]
                if reference_of(row) and reply.mode != gateway_pb2.ANSWER_MODE_ABSTAINED:
                    labels = [c.label for c in reply.citations]
                    base.reference = {k: (None if v is None else round(v, 4))
                                      for k, v in text_rules.reference_parts(
                                          reply.answer, reference_of(row), labels,
                                          domains.citation_rules(list(reply.search.query_info.domain_packs))).items()}
                judge_started = time.perf_counter()
                request = _judge_request(row, reply, judged_gold(row, gold, bool(passages)), ranked, 10,
                                         by_chunk=bool(passages))
                base.contexts, base.context_labels = list(request.contexts), list(request.context_labels)
                try:
                    judged = await judge.Judge(request, timeout=timeout)
                except grpc.aio.AioRpcError as err:
                    base.error = f"judge {err.code().name}: {err.details()}"
                    return base
                base.judge_ms = round((time.perf_counter() - judge_started) * 1000, 1)
                base.judge = {m.name: (None if m.method == judge_pb2.SCORE_METHOD_NOT_COMPUTED else round(m.value, 4))
                              for m in [*judged.metrics, judged.overall]}
                base.judge_parts = {m.name: {"rule": round(m.rule_value, 4) if m.HasField("rule_value") else None,
                                             "llm": round(m.llm_value, 4) if m.HasField("llm_value") else None,
                                             "rounds": [round(v, 4) for v in m.llm_rounds]}
                                    for m in judged.metrics if m.llm_rounds}
        return base

    try:
        return list(await asyncio.gather(*(one(r) for r in dataset)))
    finally:
        await ch.close()
        if judge_ch is not None:
            await judge_ch.close()


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def summarise(rows: list[QueryRow]) -> dict:
    """Totals over ``rows``: top1, recall@1/3/5/10, mrr@10, ndcg@10, n, errors,
    degraded, latency percentiles (milliseconds), recall@10 per category,
    recall@1/@10 and mrr@10 per detected question type,
    strategies, and the mean of each judge metric over the rows where it
    was computed (with its count)."""
    n = len(rows)

    def mean(values: list[float]) -> float:
        return round(sum(values) / n, 4) if n else 0.0

    def hit(r: QueryRow, k: int) -> float:
        return 1.0 if r.first_gold_rank is not None and r.first_gold_rank <= k else 0.0

    summary: dict = {
        "top1": mean([hit(r, 1) for r in rows]),
        "recall@1": mean([hit(r, 1) for r in rows]),
        "recall@3": mean([hit(r, 3) for r in rows]),
        "recall@5": mean([hit(r, 5) for r in rows]),
        "recall@10": mean([hit(r, 10) for r in rows]),
        "mrr@10": mean([metrics.mrr_at(r.ranked, set(r.gold), 10) for r in rows]),
        "ndcg@10": mean([metrics.ndcg_at(r.ranked, set(r.gold), 10) for r in rows]),
        "n": n,
        "errors": sum(1 for r in rows if r.error),
        "degraded": sum(1 for r in rows if r.degraded),
    }
    latencies = sorted(r.latency_ms for r in rows if not r.error)
    if latencies:
        for q in (50, 95, 99):
            summary[f"latency_ms_p{q}"] = round(_percentile(latencies, q / 100), 1)
    categories: dict[str, list[QueryRow]] = defaultdict(list)
    for r in rows:
        if r.category:
            categories[r.category].append(r)
    if categories:
        summary["category_recall@10"] = {c: {"n": len(rs), "recall@10": round(sum(hit(r, 10) for r in rs) / len(rs), 4)}
                                         for c, rs in sorted(categories.items())}
    types: dict[str, list[QueryRow]] = defaultdict(list)
    for r in rows:
        if r.question_type:
            types[r.question_type].append(r)
    if types:
        summary["by_question_type"] = {
            t: {"n": len(rs), "recall@1": round(sum(hit(r, 1) for r in rs) / len(rs), 4),
                "recall@10": round(sum(hit(r, 10) for r in rs) / len(rs), 4),
                "mrr@10": round(sum(metrics.mrr_at(r.ranked, set(r.gold), 10) for r in rs) / len(rs), 4)}
            for t, rs in sorted(types.items())}
    summary["strategies"] = dict(Counter(r.strategy or "unreported" for r in rows if not r.error))
    judged: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        for name, value in r.judge.items():
            judged.setdefault(name, [])
            if value is not None:
                judged[name].append(value)
    if judged:
        summary["judge"] = {name: {"mean": round(statistics.fmean(v), 4) if v else None, "computed": len(v)}
                            for name, v in judged.items()}
    answered = [r for r in rows if r.answer_mode and not r.error]
    if answered:
        summary["answers"] = answer_summary(answered)
    quoted = [r.answer_quotes_gold for r in rows if r.answer_quotes_gold is not None]
    if quoted:  # gold passages given as text: does the answer quote one?
        summary["answer_quotes_gold"] = round(sum(quoted) / len(quoted), 4)
    return summary


def answer_summary(rows: list[QueryRow]) -> dict:
    """Over Answer rows: how many answered and abstained (rates over the
    rows that got a reply), citation precision before verification (share
    of the original marks the verifier kept as cited) and after (share of
    the final marks it accepts: 1.0 by construction), the same by the
    independent bigram rule, unsupported sentences per answer, and the mean
    of each reference part (ROUGE-L, articles, numbers) over the answered
    rows where it was computed."""
    n = len(rows)
    abstained = sum(r.answer_mode == "abstained" for r in rows)
    totals = Counter()
    for r in rows:
        totals.update(r.citations)

    def share(a: str, b: str) -> float | None:
        return round(totals[a] / totals[b], 4) if totals[b] else None

    out: dict = {"n": n, "answered": n - abstained, "abstained": abstained, "answer_rate": round((n - abstained) / n, 4),
                 "abstain_rate": round(abstained / n, 4), "modes": dict(Counter(r.answer_mode for r in rows)),
                 "citation_marks": dict(totals),
                 "citation_precision_before": share("supported", "marks"),
                 "citation_precision_after": share("kept", "kept") if totals["kept"] else None,
                 "bigram_precision_before": share("bigram_before", "marks"),
                 "bigram_precision_after": share("bigram_after", "kept"),
                 "unsupported_per_answer": round(sum(r.unsupported for r in rows) / max(1, n - abstained), 4)}
    parts: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        for k, v in r.reference.items():
            if v is not None:
                parts[k].append(v)
    if parts:
        out["reference"] = {k: {"mean": round(statistics.fmean(v), 4), "computed": len(v)} for k, v in parts.items()}
    return out


def stage_percentiles(rows: list[QueryRow]) -> dict[str, dict[str, float]]:
    """p50/p95 per gateway stage over the successful rows (milliseconds)."""
    per: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        for stage, ms in r.stages_ms.items():
            per[stage].append(ms)
    return {s: {"p50": round(_percentile(sorted(v), 0.5), 1), "p95": round(_percentile(sorted(v), 0.95), 1)} for s, v in sorted(per.items())}


# ---- artifacts -----------------------------------------------------------
def git_state(root: Path = REPO_ROOT) -> dict:
    """{"commit", "dirty"} of the checkout at ``root`` ("unknown" outside git)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": None}
    return {"commit": commit or "unknown", "dirty": dirty}


def recorded_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """GRAPHMESH_* settings that shape behaviour (ports, addresses, secrets
    and the state directory left out), sorted."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith("GRAPHMESH_") and not _ENV_SKIP.search(k)}


def config_hash(config: dict) -> str:
    """sha256 (first 16 hex digits) of the canonical JSON of ``config``."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def file_hash(path: Path) -> str:
    """sha256 of the file's bytes (first 16 hex digits)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def build_artifact(dataset_path: Path, rows: list[QueryRow], config: dict, wall_s: float, limit: int | None) -> dict:
    """The run artifact (see the module docstring)."""
    return {
        "schema": SCHEMA,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git": git_state(),
        "config": config,
        "config_hash": config_hash(config),
        "dataset": {"path": str(dataset_path), "sha256": file_hash(dataset_path), "n": len(rows), "limit": limit},
        "totals": summarise(rows),
        "timings": {"wall_s": round(wall_s, 2), "queries_per_s": round(len(rows) / wall_s, 2) if wall_s else None,
                    "stages_ms": stage_percentiles(rows)},
        "rows": [asdict(r) for r in rows],
    }


def save_artifact(artifact: dict, out: Path | None = None) -> Path:
    """Writes ``artifact``; ``out`` is a directory (a name is made from the
    time, dataset and commit) or a .json path. Returns the file written."""
    out = out or DEFAULT_RUNS_DIR
    if out.suffix != ".json":
        stamp = artifact["created"].replace(":", "").replace("-", "").replace("+0000", "Z")
        name = f"{stamp}-{Path(artifact['dataset']['path']).stem}-{artifact['git']['commit'][:7]}.json"
        out = out / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(artifact, ensure_ascii=False, indent=1))
    return out


# ---- compare -------------------------------------------------------------
def _rank_value(rank: int | None) -> float:
    return float("inf") if rank is None else float(rank)


def compare(run_a: dict, run_b: dict) -> dict:
    """Differences from run A to run B.

    Raises:
        ValueError: either is not an `eval` run artifact (an --ablate artifact has no per-question rows).

    Returns:
        {"warnings": [...], "deltas": {metric: {"a", "b", "delta"}},
         "paired": {metric: {"n", "a", "b", "delta", "low", "high", "p_value",
         "significant"}}, "better": [...], "worse": [...], "only_a": n,
         "only_b": n}, where "paired" holds, for recall@1, recall@10 and
         mrr@10 over the questions both runs hold, the paired bootstrap 95%
         interval of the delta and its permutation p-value
         (services/cli/significance.py), and
        better/worse list queries whose first-gold rank moved (a missing gold
        counts as rank infinity), largest moves first.
    """
    for name, run in (("A", run_a), ("B", run_b)):
        if not isinstance(run.get("rows"), list) or "sha256" not in run.get("dataset", {}) \
                or run.get("config", {}).get("ablate"):
            raise ValueError(f"run {name} is not an `eval` run artifact" + (
                " (an --ablate artifact holds one row per pipeline variant, not per question: compare its rows "
                "as printed, or run `graphmesh eval` once per variant with --out and compare those)"
                if run.get("config", {}).get("ablate") else ""))
    warnings = []
    if run_a["dataset"]["sha256"] != run_b["dataset"]["sha256"]:
        warnings.append("the runs used different datasets (hashes differ); only queries with the same id are compared")
    if run_a["config_hash"] != run_b["config_hash"]:
        keys = sorted(set(run_a["config"]) | set(run_b["config"]))
        changed = [k for k in keys if run_a["config"].get(k) != run_b["config"].get(k)]
        warnings.append(f"configs differ in: {', '.join(changed)}")
    deltas = {}
    for key, a in run_a["totals"].items():
        b = run_b["totals"].get(key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            deltas[key] = {"a": a, "b": b, "delta": round(b - a, 4)}
    for name, a in run_a["totals"].get("judge", {}).items():
        b = run_b["totals"].get("judge", {}).get(name)
        if b and a["mean"] is not None and b["mean"] is not None:
            deltas[f"judge.{name}"] = {"a": a["mean"], "b": b["mean"], "delta": round(b["mean"] - a["mean"], 4)}
    rows_a = {r["id"]: r for r in run_a["rows"]}
    rows_b = {r["id"]: r for r in run_b["rows"]}
    better, worse = [], []
    for qid in rows_a.keys() & rows_b.keys():
        ra, rb = rows_a[qid]["first_gold_rank"], rows_b[qid]["first_gold_rank"]
        if _rank_value(ra) == _rank_value(rb):
            continue
        entry = {"id": qid, "query": rows_b[qid]["query"], "rank_a": ra, "rank_b": rb,
                 "strategy_a": rows_a[qid].get("strategy", ""), "strategy_b": rows_b[qid].get("strategy", "")}
        (better if _rank_value(rb) < _rank_value(ra) else worse).append(entry)

    def move(e: dict) -> float:
        a, b = _rank_value(e["rank_a"]), _rank_value(e["rank_b"])
        return abs((1 / a if a != float("inf") else 0) - (1 / b if b != float("inf") else 0))

    better.sort(key=move, reverse=True)
    worse.sort(key=move, reverse=True)
    paired = compare_ranks({q: r["first_gold_rank"] for q, r in rows_a.items()},
                           {q: r["first_gold_rank"] for q, r in rows_b.items()})
    return {"warnings": warnings, "deltas": deltas, "paired": {m: d.as_dict() for m, d in paired.items()},
            "better": better, "worse": worse,
            "only_a": len(rows_a.keys() - rows_b.keys()), "only_b": len(rows_b.keys() - rows_a.keys())}


def format_compare(result: dict, name_a: str, name_b: str, show: int = 15) -> str:
    """Human-readable report of ``compare``'s result."""
    lines = [f"A = {name_a}", f"B = {name_b}"]
    lines += [f"warning: {w}" for w in result["warnings"]]
    lines.append(f"{'metric':24s} {'A':>10s} {'B':>10s} {'B-A':>10s}")
    for key, d in result["deltas"].items():
        lines.append(f"{key:24s} {d['a']:10.4f} {d['b']:10.4f} {d['delta']:+10.4f}")
    if result.get("paired"):
        lines.append("\npaired over the shared questions: delta [95% bootstrap interval], permutation p")
        for key, d in result["paired"].items():
            verdict = "significant" if d["significant"] else "noise"
            lines.append(f"  {key:12s} n={d['n']:<5d} {d['delta']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]  "
                         f"p={d['p_value']:.4f}  {verdict}")

    def rank(r):
        return "-" if r is None else str(r)

    for label in ("better", "worse"):
        items = result[label]
        lines.append(f"\n{len(items)} queries {label} (first gold rank A -> B):")
        for e in items[:show]:
            lines.append(f"  {e['id']:>12s}  {rank(e['rank_a']):>3s} -> {rank(e['rank_b']):<3s} {e['query'][:60]}")
        if len(items) > show:
            lines.append(f"  ... {len(items) - show} more")
    if result["only_a"] or result["only_b"]:
        lines.append(f"\nqueries only in A: {result['only_a']}, only in B: {result['only_b']}")
    return "\n".join(lines)
