"""The extractive answer: what an Answer says without an LLM (or when none
of the LLM's sentences is supported), quoted from the packed sources. Pure
functions, tested directly (tests/gateway/answer/test_extractive.py):
which pieces of a source may be quoted (``quotable_pieces``), how each
covers the question (``PieceScorer``, ``sentence_score``) and the answer
built from the best of them (``extractive_answer``). How it was measured:
docs/answers.md "Extractive answers" and docs/benchmarks.md "Own documents"."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from services.common.text import query_keywords, split_sentences

EXTRACTIVE_LABEL = "（抽取式答案：未使用大模型，以下句子摘自检索到的资料）"
#: List items ("（一）", "1.", "①", "一、"), table rows ("|", tabs) and
#: list lead-ins ending in a colon are not quoted as answers.
_LIST_ITEM = re.compile(r"^\s*(?:[（(][一二三四五六七八九十\d]+[）)]|\d+[.、．]|[①-⑳]|[一二三四五六七八九十]+、|[-•·*])")
_TABLE = re.compile(r"[|\t]|\s{3,}")
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
#: Splits a sentence after a colon (a list lead-in and its first item).
_COLON_SPLIT = re.compile(r"(?<=[：:])")
_CJK = re.compile(r"[\u3400-\u9fff]")


def quotable(sentence: str) -> bool:
    """Whether ``sentence`` may be quoted as an answer: at least 6
    characters of text, and not a lead-in ending in a colon (a code
    statement ending in one, ``if score < 0.82:``, is quotable). List items
    and table rows may be quoted (a fee table's row can be the answer) but
    rank below a sentence that covers the question as well (``ITEM_PENALTY``)."""
    text = sentence.strip()
    return len(_NON_WORD.sub("", text)) >= 6 and (not text.endswith(("：", ":")) or _is_code(text))


def _is_code(line: str) -> bool:
    """Whether ``line`` reads as a code statement (an operator, a call, an
    assignment) rather than prose."""
    return bool(_CODE.search(line)) and not _CJK_RUN.search(line)


def _is_item(line: str) -> bool:
    """Whether ``line`` is a list item or a table row (``ITEM_PENALTY``)."""
    text = line.strip()
    return bool(_LIST_ITEM.match(text) or _TABLE.search(text))


def _is_lead_in(line: str) -> bool:
    """Whether ``line`` is a comment or a lead-in ending in a colon (not code)."""
    text = line.strip()
    return bool(_COMMENT.match(text)) or (text.endswith(("：", ":")) and not _is_code(text))


def _is_label(line: str) -> bool:
    """Whether ``line`` introduces the line after it instead of saying
    something itself: a comment ("# 处理 raw 目录中的所有文件"), a lead-in
    ending in a colon, or a short heading without sentence punctuation
    ("深度 RAG 编排器", or a capitalised one in another script), not a
    piece of a diagram, not code and without digits (a key-value or CSV
    row such as "Recall@5 100%" or "Bob,29,Paris" is itself the answer)."""
    text = line.strip()
    if _COMMENT.match(text):
        return True
    if text.endswith(("：", ":")):
        return not _is_code(text)
    return len(text) <= LABEL_MAX_CHARS and not _ENDS_SENTENCE.search(text) and not _is_item(text) \
        and not _is_code(text) and not _DIAGRAM.search(text) and not _DIGIT.search(text) \
        and bool(_CJK.search(text) or text[:1].isupper())


#: Score factor of a list item or table row against a prose sentence.
ITEM_PENALTY = 0.85
#: Bonus of a sentence holding a number when the question asks an amount.
NUMBER_BONUS = 0.15
#: Question words asking for an amount, a count or a threshold.
_AMOUNT_CUES = ("多少", "几", "多大", "多长", "多久", "多高", "比例", "比率", "阈值", "权重", "数量", "金额", "费用", "价格",
                "上限", "下限", "得分", "分数", "准确率", "百分之", "期限")
_HAS_NUMBER = re.compile(r"\d|[零一二两三四五六七八九十百千万]+(?:[年月日天个条项次倍元人岁%％]|分之)")
_BOX_DRAWING = re.compile(r"[\u2500-\u257f]+")
#: The vertical frame of a box diagram at the start or end of a line.
_FRAME_EDGE = re.compile(r"^[│┃║|]\s*")
_FRAME_EDGE_END = re.compile(r"\s*[│┃║|]$")
#: A code statement: a comparison, an assignment, a call or an operator between operands.
_CODE = re.compile(r"[=<>]=?|\w\(|\s[-+*/]\s")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]{4,}")
#: Arrows and box drawing: a line of a diagram.
_DIAGRAM = re.compile(r"[\u2190-\u21ff\u2500-\u257f\u25a0-\u25ff]")
#: A digit: a line holding one is a row or a value, not a heading.
_DIGIT = re.compile(r"\d")
#: A code fence line of Markdown (```bash): passed over like a listing's line numbers.
_FENCE_LINE = re.compile(r"^(```|~~~)")
#: A line ending in an arrow, or starting with one: a flow that goes on.
_ARROW_END = re.compile(r"[\u2190-\u21ff]\s*$|->\s*$")
_ARROW_START = re.compile(r"^\s*(?:[\u2190-\u21ff]|->)")
#: Longest run of continued lines offered as one piece (characters).
CONTINUATION_MAX_CHARS = 160
#: A lead-in and the list it introduces, quoted whole when the question asks for a list:
#: at most this many characters and items (a longer list is quoted up to the last item that fits).
LIST_MAX_CHARS = 240
LIST_MAX_ITEMS = 8
#: Question words asking for a list of things or steps.
_LIST_CUES = ("哪些", "哪几", "步骤", "流程", "包括什么", "有什么", "几步", "依次")
#: A letter of any script (a line of only numbers is a code listing's line number).
_LETTER = re.compile(r"[^\W\d_]")
#: A comment line of code or configuration.
_COMMENT = re.compile(r"^(?:#|//)\s*\S")
#: Longest heading (characters) read as the label of the line after it.
LABEL_MAX_CHARS = 24
#: Lines looked past (line numbers of a code listing, blank frames) for
#: the line a label introduces.
LABEL_REACH = 8
#: A line ending in punctuation that ends a sentence or a clause of one.
_ENDS_SENTENCE = re.compile(r"[。！？；，、.!?;,]$")
#: A quote ending in full-width punctuation, which needs no space after it.
_ENDS_CLAUSE = re.compile(r"[。！？；，、：」』”）]$")


#: Cells of a table row as the file readers write it ("经理 | 600元/晚 | 450元/晚").
TABLE_CELL_SEPARATOR = " | "
#: Between two table rows quoted together (a header and its row), which a space would run together.
ROW_SEPARATOR = "；"


def _is_table_row(line: str) -> bool:
    return TABLE_CELL_SEPARATOR in line


def _table_starts(lines: list[str]) -> dict[int, int]:
    """{line index: index of the first row of its table} for the table rows
    among ``lines`` (a table: consecutive rows; its first row is its header)."""
    starts: dict[int, int] = {}
    for index, line in enumerate(lines):
        if _is_table_row(line):
            starts[index] = starts.get(index - 1, index)
    return starts


def _table_run(lines: list[str], index: int, starts: dict[int, int]) -> Candidate | None:
    """A table's header row at ``lines[index]`` with the rows after it (at
    least two, up to LIST_MAX_ITEMS and LIST_MAX_CHARS), after the label
    line before it if there is one, quoted whole when the question asks for
    a list ("行动项有哪些"), or None."""
    if starts.get(index) != index:
        return None
    last = index
    while starts.get(last + 1) == index and last - index < LIST_MAX_ITEMS \
            and len(ROW_SEPARATOR.join(lines[index:last + 2])) <= LIST_MAX_CHARS:
        last += 1
    if last - index < 2:
        return None
    rows = ROW_SEPARATOR.join(lines[index:last + 1])
    if index and _is_label(lines[index - 1]):  # the table's label or lead-in ("行动项") comes with it
        return Candidate(f"{lines[index - 1]} {rows}", True, index - 1, last, lines[index - 1], list_run=True)
    return Candidate(rows, True, index, last, list_run=True)


def _bigrams(text: str) -> set[str]:
    """Character bigrams of ``text``'s letters, digits and CJK characters (lower case)."""
    squeezed = _NON_WORD.sub("", text.lower())
    return {squeezed[i:i + 2] for i in range(len(squeezed) - 1)}


def asks_list(question: str) -> bool:
    """Whether ``question`` asks for a list: which things, which steps."""
    return any(cue in question for cue in _LIST_CUES)


def _list_run(lines: list[str], index: int) -> Candidate | None:
    """The lead-in at ``lines[index]`` with the list items right after it
    (at least two, at most LIST_MAX_ITEMS and LIST_MAX_CHARS), or None."""
    if not _is_lead_in(lines[index]) or _COMMENT.match(lines[index].strip()):
        return None
    last = index
    while last + 1 < len(lines) and last - index < LIST_MAX_ITEMS and _LIST_ITEM.match(lines[last + 1]) \
            and len(" ".join(lines[index:last + 2])) <= LIST_MAX_CHARS:
        last += 1
    if last - index < 2:
        return None
    return Candidate(" ".join(lines[index:last + 1]), False, index, last, lines[index], list_run=True)


def asks_amount(question: str) -> bool:
    """Whether ``question`` asks for an amount, count, period or threshold."""
    return any(cue in question for cue in _AMOUNT_CUES)


def sentence_score(sentence: str, keywords: list[str], question_bigrams: set[str] | None = None,
                   wants_number: bool = False, idf: dict[str, float] | None = None, item: bool | None = None) -> float:
    """How well ``sentence`` answers, in [0, ~1.15]: the share of the
    question's content keywords it holds (weighted by length in characters
    times ``idf``; half the score when ``question_bigrams`` are given), the
    idf-weighted share of the question's character bigrams it holds (the
    other half: catches words the tokenizer splits differently), plus
    NUMBER_BONUS when the question asks an amount and the sentence states a
    number; list items and table rows count ITEM_PENALTY of that (``item``
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
    if score and wants_number and _HAS_NUMBER.search(sentence):
        score += NUMBER_BONUS
    if item is None:
        item = _is_item(sentence)
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


@dataclass(frozen=True, slots=True)
class Candidate:
    """One quotable piece of a packed text.

    Attributes:
        text: the piece as it is quoted.
        item: whether the line it comes from is a list item or a table row
            (a piece cut from "• Shape confusion：马玲薯 -> 马铃薯。" is still
            part of a list item, so it cannot outrank its whole line).
        first / last: indices of the first and last line it spans in its
            packed text (a label joined to its line spans two).
        list_run: a lead-in with the list items that follow it
            ("安装步骤如下： 1. 下载… 2. 执行… 3. 运行…"), quoted whole when
            the question asks for a list (``asks_list``).
        label: the label it starts with ("" for a single line); between
            two pieces that answer as well, the one whose label matches
            the question better is quoted ("初始检索 (混合) 生成子查询" over
            "用户查询输入 初始检索 (混合)" when asked what follows 初始混合检索).
        header_at / header: for a row of a table below its header row,
            the index and text of that header line (quoted with the row, so
            that its values keep their column names); -1 and "" otherwise.
    """

    text: str
    item: bool
    first: int
    last: int
    label: str = ""
    list_run: bool = False
    header_at: int = -1
    header: str = ""

    def overlaps(self, other: "Candidate") -> bool:
        """Whether the two pieces share a line of their text."""
        return self.first <= other.last and other.first <= self.last


def _unframe(line: str) -> str:
    """``line`` without the frame of a box diagram around it ("│ text │" ->
    "text"); box-drawing inside the line (arrows, a tree's "├──") is kept,
    since it is part of what the line says and of what a reader searches for."""
    line = line.strip()
    if _FRAME_EDGE.match(line) and _FRAME_EDGE_END.search(line):
        line = _FRAME_EDGE_END.sub("", _FRAME_EDGE.sub("", line))
    return line.strip()


def _describes(line: str, follower: str) -> bool:
    """Whether ``follower`` is a prose sentence saying what ``line``, a line
    of code or a command without any CJK text, does ("python app.py
    --interactive" / "在您的终端中启动一个类似聊天的界面。")."""
    return not _CJK.search(line) and bool(_CJK.search(follower)) and bool(_ENDS_SENTENCE.search(follower)) \
        and _LETTER.search(line) is not None


def _continues(line: str, follower: str) -> bool:
    """Whether ``follower`` goes on from ``line``: a diagram's flow that
    breaks after an arrow ("→ 超限自动截断 →" / "→ 最接近换行或句号处切断"), or
    the description of a command (``_describes``)."""
    return bool(_ARROW_END.search(line) or _ARROW_START.match(follower)) or _describes(line, follower)


def quotable_pieces(text: str) -> list[Candidate]:
    """Quotable pieces of one packed text in reading order: its sentences
    and lines, diagram frames trimmed; a line with a colon inside is offered
    whole (unless a list item follows the colon) and also cut after the
    colon (a lead-in and what follows); a label line (``_is_label``: a
    comment, a lead-in, a short heading) is also offered joined to the
    quotable line it introduces, since the question often asks in the
    label's words for what the next line says. Every piece carries whether
    its line is a list item or table row."""
    lines = [line for line in (_unframe(s) for s in split_sentences(text.strip()))
             if line and _NON_WORD.sub("", _BOX_DRAWING.sub("", line))]
    out: list[Candidate] = []
    starts = _table_starts(lines)
    for index, line in enumerate(lines):
        item = _is_item(line)
        listed = _list_run(lines, index) or _table_run(lines, index, starts)
        if listed:
            out.append(listed)
        if _is_label(line):
            # past line numbers of a code listing and code fences, up to the first line with words
            at = next((j for j in range(index + 1, min(len(lines), index + 1 + LABEL_REACH))
                       if _LETTER.search(lines[j]) and not _FENCE_LINE.match(lines[j])), None)
            follower = lines[at] if at is not None else ""
            # a heading introduces a longer body; a label and its line quoted together must fit a quote
            if follower and quotable(follower) and (_is_lead_in(line) or len(follower) > len(line)) \
                    and len(line) + 1 + len(follower) <= CONTINUATION_MAX_CHARS:
                out.append(Candidate(f"{line} {follower}", _is_item(follower),
                                     index, at, line))
        elif index + 1 < len(lines) and _continues(line, lines[index + 1]) \
                and len(line) + 1 + len(lines[index + 1]) <= CONTINUATION_MAX_CHARS:
            # "→ 超限自动截断 →" / "→ 最接近换行或句号处切断"; a command and the sentence saying what it does:
            # the run of lines that go on from each other, up to CONTINUATION_MAX_CHARS
            last = index + 1
            while last + 1 < len(lines) and _continues(lines[last], lines[last + 1]) \
                    and len(" ".join(lines[index:last + 2])) <= CONTINUATION_MAX_CHARS:
                last += 1
            follower = lines[index + 1]
            out.append(Candidate(" ".join(lines[index:last + 1]), item, index, last,
                                 follower if _describes(line, follower) else ""))
        header = starts[index] if starts.get(index, index) != index else -1
        pieces = [c.strip() for c in _COLON_SPLIT.split(line) if c.strip()]
        if len(pieces) > 1 and not any(_LIST_ITEM.match(piece) for piece in pieces[1:]):
            out.append(Candidate(line, item, index, index))  # "入口: POST /api/..." whole; never a lead-in glued to a list item
        out.extend(Candidate(piece, item, index, index, header_at=header, header=lines[header] if header >= 0 else "")
                   for piece in pieces)
    return out


def _join(quotes: list[str]) -> str:
    """Quoted pieces of one source in reading order: ROW_SEPARATOR between
    two rows of a table (a header and its row); else a space between two
    unless the first ends in full-width punctuation or both meet at CJK
    characters (Chinese sentences, and a word a PDF wrapped across two lines,
    are joined as written; code lines, headings and English sentences are
    not glued together)."""
    out, previous = "", ""
    for quote in quotes:
        if out and (_is_table_row(previous) or _is_table_row(quote)):
            out += ROW_SEPARATOR  # rows of a table are not one sentence
        elif out and not _ENDS_CLAUSE.search(out) and not (_CJK.match(out[-1]) and _CJK.match(quote[:1])):
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

    def __init__(self, question: str, pieces: list[list[Candidate]]) -> None:
        keywords = query_keywords(question) if question else []
        self.keywords = [k for k in keywords if not any(k != o and k in o for o in keywords)]
        self.pieces = pieces
        self._bigrams = _bigrams(question) if question else set()
        self._wants_number = asks_amount(question)
        if not asks_list(question):  # a list is quoted whole only when asked for
            pieces = [[c for c in cs if not c.list_run] for cs in pieces]
            self.pieces = pieces
        self._idf = _idf([c.text for cs in pieces for c in cs], set(self.keywords) | self._bigrams)

    def score(self, candidate: Candidate) -> float:
        """The piece's score, in [0, ~1.15] (``sentence_score``)."""
        return sentence_score(candidate.text, self.keywords, self._bigrams, self._wants_number, self._idf, candidate.item)

    def label_score(self, candidate: Candidate) -> float:
        """The score of the piece's label alone (0 without one): the tie-breaker
        between two pieces that answer as well."""
        if not candidate.label:
            return 0.0
        return sentence_score(candidate.label, self.keywords, self._bigrams, False, self._idf, False)


def extractive_answer(texts: list[str], question: str = "", max_sources: int = 3, max_chars_per_source: int = 160,
                      max_sentences_per_source: int = 2) -> str:
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
    quoted."""
    scorer = PieceScorer(question, [quotable_pieces(text) for text in texts[:max_sources]])
    keywords, score, label_score = scorer.keywords, scorer.score, scorer.label_score
    lines = [EXTRACTIVE_LABEL]
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
