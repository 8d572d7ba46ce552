"""The extractive answer: what an Answer says without an LLM (or when none of the LLM's sentences
is supported), quoted from the packed sources. Pure functions, tested directly
(tests/gateway/answer/test_extractive.py): which pieces of a source may be quoted
(``quotable.quotable_pieces``), how each covers the question (``piece_scoring.PieceScorer``, ``sentence_score``)
and the answer built from the best of them (``extractive_answer``). How it was measured:
docs/answers.md "Extractive answers" and docs/benchmarks.md "Own documents"."""
from __future__ import annotations

import re
from collections.abc import Mapping

from services.common.text import in_script_of, is_table_row, latin_script, simplified
from services.gateway.answer.piece_scoring import PieceScorer, sentence_score
from services.gateway.answer.pieces import Candidate, headers_of, table_after, table_rows
from services.gateway.answer.question_cues import asked_number, asks_amount, asks_list
from services.gateway.answer.quotable import (CJK, LIST_MAX_CHARS, ROW_SEPARATOR, quotable, quotable_pieces,
                                              row_separator)

__all__ = ["EXTRACTIVE_LABEL", "EXTRACTIVE_LABEL_EN", "GAP", "LIST_MAX_CHARS", "ROW_SEPARATOR", "Candidate", "PieceScorer", "asks_amount",
           "asked_number", "asks_list", "closest_quote", "extractive_answer", "extractive_label", "pieces_to_embed", "quotable", "quotable_pieces", "sentence_score"]


EXTRACTIVE_LABEL = "（抽取式答案：未使用大模型，以下句子摘自检索到的资料）"
#: The same for a question in Latin script (an English question over English documents).
EXTRACTIVE_LABEL_EN = "(Extractive answer: no LLM was used; the sentences below are quoted from the retrieved sources)"


#: A token holding a digit: a code or number (SKU-A1023, UN3481), no word of any language.
_CODE_TOKEN = re.compile(r"[A-Za-z0-9_.-]*\d[A-Za-z0-9_.-]*")


def extractive_label(question: str) -> str:
    """The label an extractive answer starts with, in the question's language (Chinese unless it is in Latin script,
    in traditional characters under a question written in them). A question of codes alone ("SKU-A1023", "UN3481")
    is in no language: Chinese, as a trial's staff pasting codes expected."""
    words = _CODE_TOKEN.sub(" ", question)
    latin = bool(re.search(r"[A-Za-z]", words)) and latin_script(question)
    return EXTRACTIVE_LABEL_EN if question and latin else in_script_of(question, EXTRACTIVE_LABEL)
_ENDS_SENTENCE = re.compile(r"[。！？；.!?;]$")  # a quote ending a sentence: a table row after it needs no ROW_SEPARATOR
_ENDS_CLAUSE = re.compile(r"[。！？；，、：」』”）]$")  # a quote ending in full-width punctuation, which needs no space after it
#: A piece that starts with its own label ("支付渠道对接：林晓雯"): a new item, never glued to the line before.
_LABELLED = re.compile(r"^[^，。！？；,;:：]{1,24}[：:]\s*\S")


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


def pieces_to_embed(texts: list[str], max_sources: int = 3) -> list[str]:
    """The distinct quotable pieces of the first ``max_sources`` texts, in
    order: what ``extractive_answer`` scores, so what a caller embeds for its
    ``similarity``."""
    return list(dict.fromkeys(c.text for text in texts[:max_sources] for c in quotable_pieces(text)))


def extractive_answer(texts: list[str], question: str = "", max_sources: int = 3, max_chars_per_source: int = 160,
                      max_sentences_per_source: int = 2, similarity: Mapping[str, float] | None = None,
                      similarity_weight: float = 1.0, similarity_ranks_only: bool = False) -> str:
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
    ``similarity`` (piece -> dense similarity to the question, ``pieces_to_embed``) adds to each piece's score,
    times ``similarity_weight`` (``cross_script.similarity_weight``). ``similarity_ranks_only``: the similarity
    orders the pieces but the words alone decide whether a later source is quoted (within one script, where
    words are shared: with the similarity deciding too, 3 sources were quoted in 347 answers of 1,260 against
    194)."""
    scorer = PieceScorer(question, [quotable_pieces(text) for text in texts[:max_sources]], similarity, similarity_weight)
    keywords, score, label_score = scorer.keywords, scorer.score, scorer.label_score
    lines = [extractive_label(question)]
    lead = 0.0  # the best score of the first source's pieces
    for number, found in enumerate(scorer.pieces, start=1):
        scored = [(score(c), label_score(c), i, c) for i, c in enumerate(found)]
        words = {id(c): s - scorer.similarity(c) for s, _, _, c in scored}  # each piece's word score alone
        # a whole sentence or labelled line answers as well as its best part, which it holds (quoted through it)
        scored = [(max([s, *(t[0] for t in scored if c.holds(t[3]) and quotable(t[3].text))]), b, i, c) for s, b, i, c in scored]
        candidates = [t for t in scored if quotable(t[3].text) and not t[3].header_row
                      and not any(w.holds(t[3]) for _, _, _, w in scored)] or scored[:1]
        # another item's piece (P3's row, asked P1; a row beside the one whose cell the question names) last; best
        # first; ties: list lead-in, label, whole sentence, fewer lines, order
        named = {t[3].header_at for t in candidates if scorer.names_row(t[3])}
        ranked = sorted(candidates, key=lambda t: (scorer.names_another_number(t[3]) or (
            t[3].header_at in named and t[3].item and not scorer.names_row(t[3])), -t[0], -t[3].list_run, -t[1],
            not t[3].whole_sentence, t[3].last - t[3].first, t[2]))
        if similarity_ranks_only:  # the words alone decide whether a later source is quoted
            best = max((words[id(t[3])] for t in ranked), default=0.0)
        else:
            best = ranked[0][0] if ranked else 0.0
        if number == 1:
            lead = best
        elif keywords and (not ranked or best == 0 or best < LATER_SOURCE_MIN_SHARE * lead
                           or scorer.names_another_number(ranked[0][3])):
            continue
        chosen: list[Candidate] = []
        used = 0
        budget = max_chars_per_source
        for piece in ranked:
            candidate = piece[3]
            sentence = candidate.text
            if len(chosen) >= max_sentences_per_source or (chosen and chosen[0].list_run):
                break
            if chosen and (used + len(GAP) + len(sentence) > max_chars_per_source or (keywords and piece[0] == 0)
                           or any(candidate.overlaps(c) or sentence in c.text or c.text in sentence for c in chosen)
                           or scorer.names_another_number(candidate)
                           or (candidate.item and scorer.is_asked_row(chosen[0]))):  # the row asked for: alone
                continue
            chosen.append(candidate)
            used += len(sentence) + (len(GAP) if used else 0)
            if candidate.list_run:  # the list whole, alone: up to LIST_MAX_CHARS
                budget = max(budget, len(sentence))
        if number == 1 and chosen and chosen[0].header_at >= 0 and not scorer.finds_subject(found):
            # a follow-up's new subject names no row ("那孩子呢？" over 中小学生和婴幼儿): the table's other rows, to read it in
            rows = [c for c in table_rows(chosen[0].header_at, found) if not scorer.names_another_number(c)]
            chosen, budget = rows or chosen, max(budget, sum(len(c.text) + len(GAP) for c in rows))
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


def closest_quote(text: str, question: str) -> str:
    """The piece of one source ``text`` the extractive answer would quote for ``question`` (its best piece, with a
    row's header), without citation mark; "" when it holds none of the question's content words. What an abstention
    shows beside its nearest sources, so that a refused question whose answer is in the first source still shows
    it, marked as not vouched for (three trials' residents and members read a bare refusal as "not in the
    documents" while the answering line was first)."""
    lines = extractive_answer([text], question, max_sources=1, max_sentences_per_source=1).splitlines()[1:]
    quote = "\n".join(lines).rsplit(" [", 1)[0]  # a list or steps run is quoted a line an item
    words = PieceScorer(question, []).keywords
    return quote if quote and any(w in simplified(quote).lower() for w in words) else ""
