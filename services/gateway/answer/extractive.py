"""The extractive answer: what an Answer says without an LLM (or when none
of the LLM's sentences is supported), quoted from the packed sources. Pure
functions, tested directly (tests/gateway/answer/test_extractive.py):
which pieces of a source may be quoted (``quotable.quotable_pieces``), how each
covers the question (``PieceScorer``, ``sentence_score``) and the answer
built from the best of them (``extractive_answer``). How it was measured:
docs/answers.md "Extractive answers" and docs/benchmarks.md "Own documents"."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping

from services.common.text import is_table_row, latin_script, query_keywords
from services.gateway.answer.quotable import (CJK, LIST_MAX_CHARS, NON_WORD, ROW_SEPARATOR, Candidate, is_item, quotable,
                                              quotable_pieces)

__all__ = ["EXTRACTIVE_LABEL", "EXTRACTIVE_LABEL_EN", "GAP", "LIST_MAX_CHARS", "ROW_SEPARATOR", "Candidate", "PieceScorer", "asks_amount",
           "asked_number", "asks_list", "extractive_answer", "extractive_label", "pieces_to_embed", "quotable", "quotable_pieces",
           "sentence_score"]


EXTRACTIVE_LABEL = "（抽取式答案：未使用大模型，以下句子摘自检索到的资料）"
#: The same for a question in Latin script (an English question over English documents).
EXTRACTIVE_LABEL_EN = "(Extractive answer: no LLM was used; the sentences below are quoted from the retrieved sources)"


def extractive_label(question: str) -> str:
    """The label an extractive answer starts with, in the question's language (Chinese unless it is in Latin script)."""
    return EXTRACTIVE_LABEL_EN if question and latin_script(question) else EXTRACTIVE_LABEL
#: Score factor of a list item or table row against a prose sentence.
ITEM_PENALTY = 0.85
#: Bonus of a sentence holding a number when the question asks an amount.
NUMBER_BONUS = 0.15
#: Question words asking for an amount, a count or a threshold.
_AMOUNT_CUES = ("多少", "几", "多大", "多长", "多久", "多高", "比例", "比率", "阈值", "权重", "数量", "金额", "费用", "价格",
                "上限", "下限", "得分", "分数", "准确率", "百分之", "期限")
_HAS_NUMBER = re.compile(r"\d|[零一二两三四五六七八九十百千万]+(?:[年月日天个条项次倍元人岁%％]|分之)")
#: The same in English questions (whole words, any case).
_ENGLISH_AMOUNT = re.compile(r"\b(?:how (?:many|much|long|often|old|far|big|large|high|soon)|what (?:percentage|percent|share|"
                             r"rate|fraction)|maximum|minimum|max|min|limit|threshold|at (?:least|most)|number of|"
                             r"price|cost|fee|deadline|amount|quota|weight)\b", re.IGNORECASE)
#: What a question asks a number of, by its words, and the numbers that answer it: a duration or
#: a time (多久, 几天, how long) is answered by a number with a unit of time, a sum of money (多少钱,
#: 费用, how much ... cost) by one with a currency. A number of another kind ("3.2.0", a clause
#: number) does not answer such a question, so only these get NUMBER_BONUS then.
_NUM = r"(?:\d+(?:[.,]\d+)*|[零一二两三四五六七八九十百千万半]+)"
_UNIT_KINDS = (
    (re.compile(r"多久|多长时间|多长时候|几天|几个?月|几年|几个?小时|几分钟|几周|几点|几号|哪天|什么时候|何时|时长|有效期|"
                r"\bhow (?:long|soon)\b|\bwhen\b|\bhow many (?:days|hours|minutes|weeks|months|years)\b", re.IGNORECASE),
     re.compile(_NUM + r"\s*(?:秒|分钟|小时|个?钟头|天|日|号|周|星期|个?月|年|点|时)|\d{1,2}:\d{2}|"
                + _NUM + r"\s*(?:seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)\b", re.IGNORECASE)),
    (re.compile(r"多少钱|几块钱|多少元|金额|费用|价格|价钱|收费|补贴|补助|工资|奖金|奖励|报销|预算|罚款|"
                r"\bhow much\b.*\b(?:cost|costs|spend|spent|pay|paid|charge)\b|\b(?:price|fee|fees|budget|cost)\b", re.IGNORECASE),
     re.compile(_NUM + r"\s*(?:元|块|万元|万|亿元|美元|英镑|欧元|角|分钱)|[¥￥$€£]\s*\d|"
                + _NUM + r"\s*(?:dollars?|pounds?|euros?|cents?|yuan|RMB|USD|CNY|EUR|GBP)\b", re.IGNORECASE)),
)


def asked_number(question: str) -> re.Pattern | bool:
    """What counts as a number that answers ``question``: the pattern of a
    number with a unit of the kinds it asks (``_UNIT_KINDS``: time, money),
    True for any number when it asks an amount of another kind
    (``asks_amount``), False when it asks none."""
    kinds = [unit.pattern for cue, unit in _UNIT_KINDS if cue.search(question)]
    if kinds:
        return re.compile("|".join(f"(?:{k})" for k in kinds), re.IGNORECASE)
    return asks_amount(question)


#: Question words asking for a list of things or steps.
_LIST_CUES = ("哪些", "哪几", "步骤", "流程", "包括什么", "有什么", "几步", "依次")
_ENGLISH_LIST = re.compile(r"\b(?:what are the|which (?:ones|are)|list|steps|what steps|what kinds? of)\b", re.IGNORECASE)
#: A quote ending a sentence: a table row after it needs no ROW_SEPARATOR.
_ENDS_SENTENCE = re.compile(r"[。！？；.!?;]$")
#: A quote ending in full-width punctuation, which needs no space after it.
_ENDS_CLAUSE = re.compile(r"[。！？；，、：」』”）]$")


def _bigrams(text: str) -> set[str]:
    """Character bigrams of ``text``'s letters, digits and CJK characters (lower case)."""
    squeezed = NON_WORD.sub("", text.lower())
    return {squeezed[i:i + 2] for i in range(len(squeezed) - 1)}


def asks_list(question: str) -> bool:
    """Whether ``question`` asks for a list: which things, which steps (Chinese or English cues)."""
    return any(cue in question for cue in _LIST_CUES) or bool(_ENGLISH_LIST.search(question))


def asks_amount(question: str) -> bool:
    """Whether ``question`` asks for an amount, count, period or threshold (Chinese or English cues)."""
    return any(cue in question for cue in _AMOUNT_CUES) or bool(_ENGLISH_AMOUNT.search(question))


def sentence_score(sentence: str, keywords: list[str], question_bigrams: set[str] | None = None,
                   wants_number: bool | re.Pattern = False, idf: dict[str, float] | None = None, item: bool | None = None) -> float:
    """How well ``sentence`` answers, in [0, ~1.15]: the share of the
    question's content keywords it holds (weighted by length in characters
    times ``idf``; half the score when ``question_bigrams`` are given), the
    idf-weighted share of the question's character bigrams it holds (the
    other half: catches words the tokenizer splits differently), plus
    NUMBER_BONUS when the question asks an amount and the sentence states a
    number (``wants_number``: True for any number, or the pattern of the
    numbers that answer, ``asked_number``); list items and table rows count ITEM_PENALTY of that (``item``
    says whether the sentence's line is one; None: judged from the sentence
    itself). ``idf``
    (term -> weight, 1 when absent) lets words found in every candidate,
    such as the document's title, count less. 0 without keywords or bigrams."""
    idf = idf or {}
    total = sum(len(k) * idf.get(k, 1.0) for k in keywords)
    text = sentence.lower()
    coverage = sum(len(k) * idf.get(k, 1.0) for k in keywords if k in text) / total if total else 0.0
    if question_bigrams:
        # fsum: exact whatever order the sets iterate in (it follows the hash
        # seed), so equal scores tie the same way in every process
        weight = math.fsum(idf.get(b, 1.0) for b in question_bigrams)
        overlap = math.fsum(idf.get(b, 1.0) for b in _bigrams(sentence) & question_bigrams) / weight if weight else 0.0
        score = 0.5 * coverage + 0.5 * overlap
    else:
        score = coverage
    if score and wants_number and (wants_number.search(sentence) if isinstance(wants_number, re.Pattern)
                                   else _HAS_NUMBER.search(sentence)):
        score += NUMBER_BONUS
    if item is None:
        item = is_item(sentence)
    if item:
        score *= ITEM_PENALTY
    return score


def _idf(lines: list[str], terms: set[str]) -> dict[str, float]:
    """Inverse frequency of each of ``terms`` over the candidate ``lines``
    (log((n + 1) / (df + 0.5)), at least 0.1), so that a word every line
    shares (a title, a heading) tells the lines apart less than a rare one."""
    lowered = [line.lower() for line in lines]
    n = len(lowered)
    return {t: max(0.1, math.log((n + 1) / (sum(t in line for line in lowered) + 0.5))) for t in terms}


def _join(quotes: list[str]) -> str:
    """Quoted pieces of one source in reading order: ROW_SEPARATOR between
    two rows of a table (a header and its row), or between a row and a
    piece that does not end its sentence; else a space between two
    unless the first ends in full-width punctuation or both meet at CJK
    characters (Chinese sentences, and a word a PDF wrapped across two lines,
    are joined as written; code lines, headings and English sentences are
    not glued together)."""
    out, previous = "", ""
    for quote in quotes:
        if out and (is_table_row(previous) or is_table_row(quote)) and not _ENDS_SENTENCE.search(out):
            out += ROW_SEPARATOR  # rows of a table are not one sentence
        elif out and not _ENDS_CLAUSE.search(out) and not (CJK.match(out[-1]) and CJK.match(quote[:1])):
            out += " "
        out += quote
        previous = quote
    return out


def _headers_of(chosen: list[Candidate]) -> list[Candidate]:
    """The header rows of the table rows among ``chosen`` that no chosen
    piece already covers, each once, as pieces of their own line."""
    wanted = {c.header_at: c.header for c in chosen if c.header_at >= 0 and not c.list_run}
    return [Candidate(text, True, at, at) for at, text in sorted(wanted.items())
            if not any(c.first <= at <= c.last for c in chosen)]


#: A source after the first is quoted only when its best piece scores at least this share of the
#: first source's best: a sentence that shares one word with the question pads the answer.
LATER_SOURCE_MIN_SHARE = 0.5
#: Between two quoted pieces that are not next to each other in their text.
GAP = " … "


def _quote(pieces: list[Candidate]) -> str:
    """The quote of ``pieces`` (in reading order): pieces of adjacent lines
    joined as written (``_join``), pieces further apart separated by GAP,
    so that a sentence and a diagram's label from lines apart do not read
    as one sentence."""
    runs: list[list[Candidate]] = []
    for piece in pieces:
        if runs and piece.first > runs[-1][-1].last + 1:
            runs.append([piece])
        elif runs:
            runs[-1].append(piece)
        else:
            runs.append([piece])
    return GAP.join(_join([p.text for p in run]).strip() for run in runs)


class PieceScorer:
    """Scores quotable pieces against one question, the way the extractive
    answer chooses what to quote: ``sentence_score`` with the question's
    content keywords (a keyword inside a longer one dropped), its character
    bigrams, the number bonus when it asks an amount, and the inverse
    frequency of each over all the ``pieces`` given (lists of
    ``quotable_pieces``, one per text).

    Attributes:
        keywords: the question's content keywords ([] without a question).
        pieces: the pieces given, per text.
    """

    def __init__(self, question: str, pieces: list[list[Candidate]],
                 similarity: Mapping[str, float] | None = None) -> None:
        keywords = query_keywords(question) if question else []
        self.keywords = [k for k in keywords if not any(k != o and k in o for o in keywords)]
        self.pieces = pieces
        self._bigrams = _bigrams(question) if question else set()
        self._wants_number = asked_number(question)
        if not asks_list(question):  # a list is quoted whole only when asked for
            pieces = [[c for c in cs if not c.list_run] for cs in pieces]
            self.pieces = pieces
        self._idf = _idf([c.text for cs in pieces for c in cs], set(self.keywords) | self._bigrams)
        self._similarity = _rescaled(similarity, [c.text for cs in self.pieces for c in cs]) if similarity else {}

    def score(self, candidate: Candidate) -> float:
        """The piece's score, in [0, ~2.15]: ``sentence_score``, plus its
        dense similarity to the question min-max scaled over the pieces
        (``similarity``, given for a question in another script than its
        sources, where no word is shared)."""
        lexical = sentence_score(candidate.text, self.keywords, self._bigrams, self._wants_number, self._idf, candidate.item)
        return lexical + self._similarity.get(candidate.text, 0.0)

    def label_score(self, candidate: Candidate) -> float:
        """The score of the piece's label alone (0 without one): the tie-breaker
        between two pieces that answer as well."""
        if not candidate.label:
            return 0.0
        return sentence_score(candidate.label, self.keywords, self._bigrams, False, self._idf, False)


def pieces_to_embed(texts: list[str], max_sources: int = 3) -> list[str]:
    """The distinct quotable pieces of the first ``max_sources`` texts, in
    order: what ``extractive_answer`` scores, so what a caller embeds for its
    ``similarity``."""
    return list(dict.fromkeys(c.text for text in texts[:max_sources] for c in quotable_pieces(text)))


def _rescaled(similarity: Mapping[str, float], texts: list[str]) -> dict[str, float]:
    """``similarity`` of ``texts`` min-max scaled to [0, 1] over them (0 for a text without one)."""
    known = [similarity[t] for t in texts if t in similarity]
    if not known:
        return {}
    low, high = min(known), max(known)
    return {t: (similarity[t] - low) / (high - low) if high > low else 1.0 for t in texts if t in similarity}


def extractive_answer(texts: list[str], question: str = "", max_sources: int = 3, max_chars_per_source: int = 160,
                      max_sentences_per_source: int = 2, similarity: Mapping[str, float] | None = None) -> str:
    """An answer quoted from the first ``max_sources`` packed texts: from
    each, the quotable sentences (``quotable``) that best cover the
    question's content words (``sentence_score``; ties keep reading order),
    at most ``max_sentences_per_source`` and ``max_chars_per_source``
    characters, in reading order (pieces lines apart separated by GAP),
    followed by the citation [n]; when the
    question asks for a list (``asks_list``) and a lead-in with its list
    items answers best, that list alone, up to LIST_MAX_CHARS. A source
    after the first is skipped when none of its sentences shares a word
    with the question, or when its best covers the question less than
    LATER_SOURCE_MIN_SHARE of the first source's best. Without a question the leading sentences are
    quoted. ``similarity`` (piece text -> dense similarity to the question, ``pieces_to_embed``)
    adds to each piece's score (``PieceScorer.score``)."""
    scorer = PieceScorer(question, [quotable_pieces(text) for text in texts[:max_sources]], similarity)
    keywords, score, label_score = scorer.keywords, scorer.score, scorer.label_score
    lines = [extractive_label(question)]
    lead = 0.0  # the best score of the first source's pieces
    for number, found in enumerate(scorer.pieces, start=1):
        scored = [(score(c), label_score(c), i, c) for i, c in enumerate(found)]
        candidates = [t for t in scored if quotable(t[3].text)] or scored[:1]
        # best first; between equals, a lead-in with its whole list (offered only when the question asks
        # for a list), then the one whose label matches, then the one of fewer lines, then reading order
        ranked = sorted(candidates, key=lambda t: (-t[0], -t[3].list_run, -t[1], t[3].last - t[3].first, t[2]))
        if number == 1:
            lead = ranked[0][0] if ranked else 0.0
        elif keywords and (not ranked or ranked[0][0] == 0 or ranked[0][0] < LATER_SOURCE_MIN_SHARE * lead):
            continue
        chosen: list[Candidate] = []
        used = 0
        budget = max_chars_per_source
        for piece_score, _, _, candidate in ranked:
            sentence = candidate.text
            if len(chosen) >= max_sentences_per_source or (chosen and chosen[0].list_run):
                break
            if chosen and (used + len(GAP) + len(sentence) > max_chars_per_source or (keywords and piece_score == 0)
                           or any(candidate.overlaps(c) or sentence in c.text or c.text in sentence for c in chosen)):
                continue
            chosen.append(candidate)
            used += len(sentence) + (len(GAP) if used else 0)
            if candidate.list_run:  # the list whole, alone: up to LIST_MAX_CHARS
                budget = max(budget, len(sentence))
        headers = _headers_of(chosen)
        if headers:  # a row keeps its column names, past the budget by the header's length
            budget = max(budget, used) + sum(len(h.text) + len(GAP) for h in headers)
        quote = _quote(sorted([*chosen, *headers], key=lambda c: (c.first, c.last)))[:budget]
        if quote:
            lines.append(f"{quote} [{number}]")
    return "\n".join(lines)
