"""Evidence signals of one search, the inputs of the abstention rule
(services.gateway.answer.abstention): pure functions of the fused results,
tested directly (tests/gateway/answer/test_abstention.py).

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
  words_known   given the question's translation (an English question over
                Chinese documents, ``abstention.reads_translation``): whether
                any of its words has a translation or occurs in the top 10;
                None otherwise (not a weight: ``abstention.decide`` abstains
                when it is False);
  first_holds_all  the first result holds the question's content words (two or more) and is first in
                pg.vector and pg.keyword, or holds its one content word, a specific one (``_specific``: a code,
                three CJK characters, five letters), and is first in pg.keyword (a trial's "42901" and "429 怎么办"
                over an error-code table were refused at answerability 0.01): answered
                whatever the fit says (docs/benchmarks.md, "Every word of the question in the channels' common
                first").
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from graphmesh.common.v1 import types_pb2
from services.common import names
from services.common.cross_lingual import Translated, words_held
from services.common.text import simplified

#: Signal names, in the order of Fit.weights.
SIGNALS = ("dense_max", "dense_second", "longest_found", "agreement", "same_source", "coverage")
#: Results whose words ``coverage`` looks in.
COVERAGE_RESULTS = 3


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
    words_known: bool | None = None

    def vector(self) -> tuple[float, ...]:
        """The signals in SIGNALS order."""
        return tuple(getattr(self, n) for n in SIGNALS)


def _text(cand: types_pb2.Candidate) -> str:
    return _NON_WORD.sub("", simplified(" ".join([cand.title, *cand.heading_path, cand.text])).lower())


def _raw_text(cand: types_pb2.Candidate) -> str:
    return " ".join([cand.title, *cand.heading_path, cand.text])


def signals(keywords: Sequence[str], results: Sequence[types_pb2.Candidate], translation: Sequence[Translated] = ()) -> Signals:
    """The evidence signals of ``results`` (fused, best first) for a
    question whose content keywords are ``keywords`` (QueryInfo.keywords).
    ``translation``: the question's words with their translations
    (QueryInfo.translation), given when the question is judged against
    evidence in the other writing system (``abstention.reads_translation``):
    ``words_known`` then says whether any of its words is known, that is
    has a translation in the dictionary or occurs, in one of its forms, in
    the top 10 (``cross_lingual.words_held``); None without one."""
    if translation:
        known = any(terms for _, terms, _ in translation) or \
            any(words_held(" ".join(_raw_text(c) for c in results[:10]), translation))
        return replace(signals(keywords, results), words_known=known)
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
    holds_all = all(w in first for w in words) and (
        len(words) >= 2 and lead.get(names.PG_VECTOR) == lead.get(names.PG_KEYWORD) == 1
        or len(words) == 1 and lead.get(names.PG_KEYWORD) == 1 and _specific(words[0]))
    return Signals(dense[0], dense[1], longest_found, len(both) / len(top) if top else 0.0, same,
                   max(rerank) if rerank else None, has_dense=dense[0] > 0.0, coverage=coverage, first_holds_all=holds_all)


def _specific(word: str) -> bool:
    """Whether one word alone names what a question is about: a code or number ("42901", "429"), three CJK
    characters or more (实用新型), or five letters or more (descaling); not an everyday two-character word that
    laws and manuals also use (计算 of 什么是云计算？, 海水 of 为什么海水是咸的？)."""
    return any(c.isdigit() for c in word) or (len(word) >= 3 if _CJK_CHAR.search(word) else len(word) >= 5)


_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


def _best(results: Sequence[types_pb2.Candidate], channel: str) -> types_pb2.Candidate | None:
    """The result with the highest score of ``channel`` (None when no result has it)."""
    best, top = None, float("-inf")
    for cand in results:
        for s in cand.channel_scores:
            if s.channel == channel and s.score > top:
                best, top = cand, s.score
    return best
