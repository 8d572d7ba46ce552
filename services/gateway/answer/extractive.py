"""The extractive answer: what an Answer says without an LLM (or when none of the LLM's sentences
is supported), quoted from the packed sources. Pure functions, tested directly
(tests/gateway/answer/test_extractive.py): which pieces of a source may be quoted
(``quotable.quotable_pieces``), how each covers the question (``PieceScorer``, ``sentence_score``)
and the answer built from the best of them (``extractive_answer``). How it was measured:
docs/answers.md "Extractive answers" and docs/benchmarks.md "Own documents"."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping

from services.common.codes import codes_in, squashed
from services.common.text import (is_table_row, keyword_terms, latin_script, numbered_classifier, numbered_names,
                                  query_keywords, simplified, weekdays_alike)
from services.gateway.answer.pieces import Candidate, headers_of, table_after
from services.gateway.answer.question_cues import asked_number, asks_amount, asks_list, condition_quantities, holds_condition
from services.gateway.answer.quotable import (CJK, LIST_MAX_CHARS, NON_WORD, ROW_SEPARATOR, is_item, quotable,
                                              quotable_pieces, row_separator)

__all__ = ["EXTRACTIVE_LABEL", "EXTRACTIVE_LABEL_EN", "GAP", "LIST_MAX_CHARS", "ROW_SEPARATOR", "Candidate", "PieceScorer", "asks_amount",
           "asked_number", "asks_list", "extractive_answer", "extractive_label", "pieces_to_embed", "quotable", "quotable_pieces", "sentence_score"]


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
#: Bonus of a piece whose range holds a quantity the question gives ("满5年不满10年 | 12天" for 干了6年): as NUMBER_BONUS.
RANGE_BONUS = 0.15
_HAS_NUMBER = re.compile(r"\d|[零一二两三四五六七八九十百千万]+(?:[年月日天个条项次倍元人岁%％]|分之)")
_ENDS_SENTENCE = re.compile(r"[。！？；.!?;]$")  # a quote ending a sentence: a table row after it needs no ROW_SEPARATOR
_ENDS_CLAUSE = re.compile(r"[。！？；，、：」』”）]$")  # a quote ending in full-width punctuation, which needs no space after it
#: A piece that starts with its own label ("支付渠道对接：林晓雯"): a new item, never glued to the line before.
_LABELLED = re.compile(r"^[^，。！？；,;:：]{1,24}[：:]\s*\S")


def _bigrams(text: str) -> set[str]:
    """Character bigrams of ``text``'s letters, digits and CJK characters (lower case)."""
    squeezed = NON_WORD.sub("", simplified(text).lower())
    return {squeezed[i:i + 2] for i in range(len(squeezed) - 1)}


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
    says whether the sentence's line is one; None: judged from the sentence itself). ``idf``
    (term -> weight, 1 when absent) lets words found in every candidate,
    such as the document's title, count less. Weekdays are read alike
    (``weekdays_alike``). 0 without keywords or bigrams."""
    idf = idf or {}
    total = sum(len(k) * idf.get(k, 1.0) for k in keywords)
    text = weekdays_alike(simplified(sentence).lower())
    coverage = sum(len(k) * idf.get(k, 1.0) for k in keywords if k in text) / total if total else 0.0
    if question_bigrams:
        # fsum: exact whatever order the sets iterate in (it follows the hash
        # seed), so equal scores tie the same way in every process
        weight = math.fsum(idf.get(b, 1.0) for b in question_bigrams)
        overlap = math.fsum(idf.get(b, 1.0) for b in _bigrams(weekdays_alike(sentence)) & question_bigrams) / weight if weight else 0.0
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
    lowered = [weekdays_alike(simplified(line).lower()) for line in lines]
    n = len(lowered)
    return {t: max(0.1, math.log((n + 1) / (sum(t in line for line in lowered) + 0.5))) for t in terms}


def _join(quotes: list[str]) -> str:
    """Quoted pieces of one source in reading order: ``row_separator`` between
    two rows of a table (a header and its row), or between a row and a
    piece that does not end its sentence; else a space between two
    unless the first ends in full-width punctuation or both meet at CJK
    characters (Chinese sentences, and a word a PDF wrapped across two lines,
    are joined as written; code lines, headings and English sentences are
    not glued together)."""
    out, previous = "", ""
    for quote in quotes:
        if out and (is_table_row(previous) or is_table_row(quote) or _LABELLED.match(quote)) and not _ENDS_SENTENCE.search(out):
            out += row_separator(previous, quote)  # rows of a table are not one sentence
        elif out and not _ENDS_CLAUSE.search(out) and not (CJK.match(out[-1]) and CJK.match(quote[:1])):
            out += " "
        out += quote
        previous = quote
    return out


#: A source after the first is quoted only when its best piece scores at least this share of the
#: first source's best: a sentence that shares one word with the question pads the answer.
LATER_SOURCE_MIN_SHARE = 0.5
#: Between two quoted pieces that are not next to each other in their text.
GAP = " … "
#: The best piece of a source is quoted whole up to this many characters, past the source's budget: a
#: sentence cut at the budget loses what it says last (a rate table's "…, fuel included" read "fuel inc").
WHOLE_PIECE_MAX_CHARS = 320
#: Ends a quote cut short (``cut_quote``); counts in the budget.
ELLIPSIS = "…"
#: Where a quote longer than its budget may be cut: after a clause or sentence mark, or at a space.
_CUT_AFTER = re.compile(r"[，,；;：:、。！？.!?）)」”]|\s")


def cut_quote(quote: str, budget: int) -> str:
    """``quote`` when it fits in ``budget`` characters; else cut after the
    last clause mark or space inside the budget (in its second half; mid-word
    only when there is none, as in a long run of Chinese without
    punctuation) and ended with ELLIPSIS, within the budget."""
    if len(quote) <= budget:
        return quote
    head = quote[: max(0, budget - len(ELLIPSIS))]
    cuts = [m.end() for m in _CUT_AFTER.finditer(head) if m.end() >= len(head) // 2]
    if cuts:
        head = head[: cuts[-1]]
    return head.rstrip(" ，,；;：:、") + ELLIPSIS


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

    def __init__(self, question: str, pieces: list[list[Candidate]], similarity: Mapping[str, float] | None = None) -> None:
        question = weekdays_alike(question)  # 星期一 and 礼拜一 as rules write them (周一); a number with its classifier
        # (3号, 5排) counts as one word, so 3号仓库 is not quoted for 5号仓库's line
        keywords = keyword_terms(question, query_keywords(question)) if question else []
        self.keywords = [k for k in keywords if not any(k != o and k in o for o in keywords)]
        self.pieces = pieces
        self._bigrams = _bigrams(question) if question else set()
        self._wants_number = asked_number(question)
        self._conditions = condition_quantities(question) if question else []
        self._numbered = numbered_names(question) if question else []
        self._codes = codes_in(question) if question else []
        if not asks_list(question):  # a list is quoted whole only when asked for
            pieces = [[c for c in cs if not c.list_run] for cs in pieces]
            self.pieces = pieces
        self._idf = _idf([c.text for cs in pieces for c in cs], set(self.keywords) | self._bigrams)
        self._similarity = _rescaled(similarity, [c.text for cs in self.pieces for c in cs]) if similarity else {}

    def score(self, candidate: Candidate) -> float:
        """The piece's score, in [0, ~2.3]: ``sentence_score`` (with its header row and RANGE_BONUS when its
        range holds a quantity the question gives, ``question_cues.holds_condition``), plus its dense similarity
        to the question min-max scaled over the pieces (``similarity``, given for a question in another script
        than its sources, where no word is shared)."""
        lexical = sentence_score(candidate.text, self.keywords, self._bigrams, self._wants_number, self._idf, candidate.item)
        if self._conditions and holds_condition(candidate.text, self._conditions):  # a row's subject is in its header
            lexical = sentence_score(f"{candidate.header} {candidate.text}", self.keywords, self._bigrams, self._wants_number,
                                     self._idf, candidate.item)
            lexical += RANGE_BONUS if lexical or self._similarity else 0.0  # across scripts no word is shared
        return lexical + self._similarity.get(candidate.text, 0.0)

    def names_another_number(self, candidate: Candidate) -> bool:
        """Whether the piece names another item than the question under the
        same classifier ("第1排" where it asks "第5排", "5号仓库" where it asks
        "3号仓库", the P3 row where it asks about P1, by ``numbered_names``;
        quantities such as "5天" never conflict, a range may answer them), or
        another code of the same shape (``_names_another_code``)."""
        if self._codes and _names_another_code(candidate.text, self._codes):
            return True
        if not self._numbered:
            return False
        found = numbered_names(candidate.text)
        return any(term not in found and any(numbered_classifier(f) == numbered_classifier(term) for f in found)
                   for term in self._numbered)

    def label_score(self, candidate: Candidate) -> float:
        """The score of the piece's label alone (0 without one): the tie-breaker
        between two pieces that answer as well."""
        if not candidate.label:
            return 0.0
        return sentence_score(candidate.label, self.keywords, self._bigrams, False, self._idf, False)


def _code_shape(code: str) -> str:
    """A code's shape: each digit 9, each letter A ("2026-10-20" -> "9999-99-99", "SEV1" -> "AAA9")."""
    return re.sub(r"[A-Za-z]", "A", re.sub(r"\d", "9", code.upper()))


def _names_another_code(text: str, codes: list[str]) -> bool:
    """Whether ``text`` names a code of the same shape as one of ``codes``
    (the question's) without holding that one: the 2026-10-27 row where the
    question asks about the week of 2026-10-20, part 2906-0980-00 where it
    asks about 1622-0655-00 (a trial's rotation table quoted two other
    weeks' rows, with the names of their engineers)."""
    found = codes_in(text)
    if not found:
        return False
    held = squashed(text)
    shapes = {_code_shape(f) for f in found}
    return any(squashed(code) not in held and _code_shape(code) in shapes for code in codes)


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
    characters (the best one whole up to WHOLE_PIECE_MAX_CHARS; a quote over its budget is cut at a clause
    mark or space, ``cut_quote``), in reading order (pieces lines apart separated by GAP), followed by the
    citation [n]; when the question asks for a list (``asks_list``) and a lead-in with its list
    items answers best, that list alone, up to LIST_MAX_CHARS. A source
    after the first is skipped when none of its sentences shares a word
    with the question, or when its best covers the question less than
    LATER_SOURCE_MIN_SHARE of the first source's best. Without a question the leading sentences are quoted.
    ``similarity`` (piece -> dense similarity to the question, ``pieces_to_embed``) adds to each piece's score."""
    scorer = PieceScorer(question, [quotable_pieces(text) for text in texts[:max_sources]], similarity)
    keywords, score, label_score = scorer.keywords, scorer.score, scorer.label_score
    lines = [extractive_label(question)]
    lead = 0.0  # the best score of the first source's pieces
    for number, found in enumerate(scorer.pieces, start=1):
        scored = [(score(c), label_score(c), i, c) for i, c in enumerate(found)]
        # a whole sentence or labelled line answers as well as its best part, which it holds (quoted through it)
        scored = [(max([s, *(t[0] for t in scored if c.holds(t[3]) and quotable(t[3].text))]), b, i, c) for s, b, i, c in scored]
        candidates = [t for t in scored if quotable(t[3].text) and not t[3].header_row
                      and not any(w.holds(t[3]) for _, _, _, w in scored)] or scored[:1]
        # another item's piece (P3's row, asked P1) last; best first; ties: list lead-in, label, whole sentence, fewer lines, order
        ranked = sorted(candidates, key=lambda t: (scorer.names_another_number(t[3]), -t[0], -t[3].list_run, -t[1],
                                                   not t[3].whole_sentence, t[3].last - t[3].first, t[2]))
        if number == 1:
            lead = ranked[0][0] if ranked else 0.0
        elif keywords and (not ranked or ranked[0][0] == 0 or ranked[0][0] < LATER_SOURCE_MIN_SHARE * lead
                           or scorer.names_another_number(ranked[0][3])):
            continue
        chosen: list[Candidate] = []
        used = 0
        budget = max_chars_per_source
        for piece_score, _, _, candidate in ranked:
            sentence = candidate.text
            if len(chosen) >= max_sentences_per_source or (chosen and chosen[0].list_run):
                break
            if chosen and (used + len(GAP) + len(sentence) > max_chars_per_source or (keywords and piece_score == 0)
                           or any(candidate.overlaps(c) or sentence in c.text or c.text in sentence for c in chosen)
                           or scorer.names_another_number(candidate)):
                continue
            chosen.append(candidate)
            used += len(sentence) + (len(GAP) if used else 0)
            if candidate.list_run:  # the list whole, alone: up to LIST_MAX_CHARS
                budget = max(budget, len(sentence))
        table = table_after(chosen[0], found) if number == 1 and chosen and not chosen[0].item else []
        if table and not any(c.header_at == table[0].header_at for c in chosen):
            # the first source's sentence introducing a small table answers with it, and the question named no row:
            # quote the rows too (a trial's 出差住宿标准？ got the sentence and not the city-tier table under it)
            chosen = [chosen[0], *table, *chosen[1:]]
            budget = max(budget, sum(len(c.text) + len(GAP) for c in chosen))
        if chosen:  # the best piece whole, up to WHOLE_PIECE_MAX_CHARS
            budget = max(budget, min(len(chosen[0].text), WHOLE_PIECE_MAX_CHARS))
        headers = headers_of(chosen)
        if headers:  # a row keeps its column names, past the budget by the header's length
            budget = max(budget, used) + sum(len(h.text) + len(GAP) for h in headers)
        quote = cut_quote(_quote(sorted([*chosen, *headers], key=lambda c: (c.first, c.last))), budget)
        if quote and not any(line.rsplit(" [", 1)[0] == quote for line in lines[1:]):  # a copy's quote adds nothing
            lines.append(f"{quote} [{number}]")
    return "\n".join(lines)
