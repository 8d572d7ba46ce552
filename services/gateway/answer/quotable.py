"""Which pieces of a packed text the extractive answer may quote
(services.gateway.answer.extractive chooses among them): its sentences and
lines, diagram frames trimmed; a line with a colon whole and cut after the
colon; a label (a comment, a lead-in, a short heading) joined to the line it
introduces; a command joined to the sentence saying what it does; a flow
broken after an arrow; a lead-in with its list items and a table with its
header row, quoted whole when a question asks for a list; and, for a table
row, the header row quoted with it. Pure functions, tested through the
extractive answer (tests/gateway/answer/test_extractive.py)."""
from __future__ import annotations

import re
from itertools import groupby

from services.common.text import is_table_row, table_headers
from services.gateway.answer.code_lines import COMMENT, FENCE_LINE, LETTER, commented_block, lines_joined
from services.gateway.answer.pieces import Candidate
from services.gateway.answer.sentences import text_pieces


#: List items ("（一）", "1.", "①", "一、"), table rows ("|", tabs) and
#: list lead-ins ending in a colon are not quoted as answers.
_LIST_ITEM = re.compile(r"^\s*(?:[（(][一二三四五六七八九十\d]+[）)]|\d+[.、．]|[①-⑳]|[一二三四五六七八九十]+、|[-•·*])")
_TABLE = re.compile(r"[|\t]|\s{3,}")
NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
#: Splits a sentence after a colon (a list lead-in and its first item).
_COLON_SPLIT = re.compile(r"(?<=：)|(?<=:)(?=\s|[\u3400-\u9fff])")
CJK = re.compile(r"[\u3400-\u9fff]")


def quotable(sentence: str) -> bool:
    """Whether ``sentence`` may be quoted as an answer: at least 6
    characters of text, not a lead-in ending in a colon (a code
    statement ending in one, ``if score < 0.82:``, is quotable), and not a
    question (an FAQ's "Q: How do I pay for a client dinner?" shares the
    asker's words and answers nothing; its answer follows it). List items
    and table rows may be quoted (a fee table's row can be the answer) but
    rank below a sentence that covers the question as well (``ITEM_PENALTY``).
    A table row of two or more filled cells is quotable however short: "丧假 |
    3天" answers "丧假有几天？", quoted with its header row (a trial's leave
    table found first, and an unrelated sentence quoted instead)."""
    text = sentence.strip()
    long_enough = len(NON_WORD.sub("", text)) >= 6 or _short_row(text)
    return long_enough and (not text.endswith(("：", ":")) or _is_code(text)) and not _is_question(text)


def _short_row(line: str) -> bool:
    """Whether ``line`` is a table row (as the file readers write one) with two or more filled cells."""
    return is_table_row(line) and sum(bool(NON_WORD.sub("", cell)) for cell in line.split("|")) >= 2


def _is_code(line: str) -> bool:
    """Whether ``line`` reads as a code statement (an operator, a call, an
    assignment) rather than prose."""
    return bool(_CODE.search(line)) and not _CJK_RUN.search(line)


def is_item(line: str) -> bool:
    """Whether ``line`` is a list item or a table row (``ITEM_PENALTY``)."""
    text = line.strip()
    return bool(_LIST_ITEM.match(text) or _TABLE.search(text))


def _is_lead_in(line: str) -> bool:
    """Whether ``line`` is a comment or a lead-in ending in a colon (not code)."""
    text = line.strip()
    return bool(COMMENT.match(text)) or (text.endswith(("：", ":")) and not _is_code(text))


def _is_question(line: str) -> bool:
    """Whether ``line`` asks a question (an FAQ's "Q: Can I expense a chair?"): it introduces its answer."""
    return line.strip().endswith(("?", "？"))


def is_label(line: str) -> bool:
    """Whether ``line`` introduces the line after it instead of saying
    something itself: a comment ("# 处理 raw 目录中的所有文件"), a question
    (an FAQ's, answered by the line after it), a lead-in
    ending in a colon, or a short heading without sentence punctuation
    ("深度 RAG 编排器", or a capitalised one in another script), not a
    piece of a diagram, not code and without digits (a key-value or CSV
    row such as "Recall@5 100%" or "Bob,29,Paris" is itself the answer)."""
    text = line.strip()
    if COMMENT.match(text) or _is_question(text):
        return True
    if text.endswith(("：", ":")):
        return not _is_code(text)
    return len(text) <= LABEL_MAX_CHARS and not _ENDS_SENTENCE.search(text) and not is_item(text) \
        and not _is_code(text) and not _DIAGRAM.search(text) and not _DIGIT.search(text) \
        and bool(CJK.search(text) or text[:1].isupper())


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
#: A line ending in an arrow, or starting with one: a flow that goes on.
_ARROW_END = re.compile(r"[\u2190-\u21ff]\s*$|->\s*$")
_ARROW_START = re.compile(r"^\s*(?:[\u2190-\u21ff]|->)")
#: Longest run of continued lines offered as one piece (characters).
CONTINUATION_MAX_CHARS = 160
#: A lead-in and the list it introduces, quoted whole when the question asks for a list:
#: at most this many characters and items (a longer list is quoted up to the last item that fits).
LIST_MAX_CHARS = 240
LIST_MAX_ITEMS = 8
#: Longest heading (characters) read as the label of the line after it.
LABEL_MAX_CHARS = 24
#: Lines looked past (line numbers of a code listing, blank frames) for
#: the line a label introduces.
LABEL_REACH = 8
#: A line ending in punctuation that ends a sentence or a clause of one.
_ENDS_SENTENCE = re.compile(r"[。！？；，、.!?;,]$")
#: Between two table rows quoted together (a header and its row), which a space would run together.
ROW_SEPARATOR = "；"
#: The same between rows without Chinese, where a full-width mark reads as a stray character.
LATIN_ROW_SEPARATOR = "; "


def row_separator(*rows: str) -> str:
    """ROW_SEPARATOR when any of ``rows`` holds CJK characters, else LATIN_ROW_SEPARATOR."""
    return ROW_SEPARATOR if any(CJK.search(row) for row in rows) else LATIN_ROW_SEPARATOR


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
    rows = row_separator(*lines[index:last + 1]).join(lines[index:last + 1])
    if index and is_label(lines[index - 1]):  # the table's label or lead-in ("行动项") comes with it
        return Candidate(f"{lines[index - 1]} {rows}", True, index - 1, last, lines[index - 1], list_run=True)
    return Candidate(rows, True, index, last, list_run=True)


def _list_run(lines: list[str], index: int) -> Candidate | None:
    """The lead-in at ``lines[index]`` with the list items right after it
    (at least two, at most LIST_MAX_ITEMS and LIST_MAX_CHARS), or None."""
    if not _is_lead_in(lines[index]) or COMMENT.match(lines[index].strip()):
        return None
    last = index
    while last + 1 < len(lines) and last - index < LIST_MAX_ITEMS and _LIST_ITEM.match(lines[last + 1]) \
            and len(" ".join(lines[index:last + 2])) <= LIST_MAX_CHARS:
        last += 1
    if last - index < 2:
        return None
    return Candidate(" ".join(lines[index:last + 1]), False, index, last, lines[index], list_run=True)


#: The longest run of numbered steps quoted whole: a procedure is read in full or from its start, longer than a
#: list under a lead-in (LIST_MAX_CHARS).
STEPS_MAX_CHARS = 400
#: The first item of a numbered list: 1. / 1、 / （1） / 一、 / ①.
_FIRST_STEP = re.compile(r"^\s*(?:1[.、．]|[（(]1[）)]|[（(]一[）)]|一、|①)")


#: List markers by numbering style: another style than a list's is an outer level (四、 heading steps 1. to 5.).
_MARKER_STYLE = re.compile(r"^\s*(?:(?P<arabic>\d+[.、．])|(?P<paren>[（(]\d+[）)])|(?P<paren_cn>[（(][一二三四五六七八九十]+[）)])"
                           r"|(?P<cn>[一二三四五六七八九十]+、)|(?P<circled>[①-⑳]))")


def _marker_style(line: str) -> str:
    """The numbering style of ``line``'s list marker ("" for none, a bullet)."""
    return getattr(_MARKER_STYLE.match(line), "lastgroup", None) or ""


def _steps_run(lines: list[str], index: int) -> Candidate | None:
    """A numbered list from its first item, with no lead-in line before it (its heading, 手动切换步骤, is
    the chunk's heading path): the items in order (at least two, at most LIST_MAX_ITEMS and STEPS_MAX_CHARS),
    or None. A question asking for steps is answered from step 1, in order: a trial's runbook answer began
    at step 3 and skipped the check that must come first."""
    if not _FIRST_STEP.match(lines[index]) or (index and _LIST_ITEM.match(lines[index - 1])
                                               and _marker_style(lines[index - 1]) == _marker_style(lines[index])):
        return None
    last = index
    while last + 1 < len(lines) and last - index + 1 < LIST_MAX_ITEMS and _LIST_ITEM.match(lines[last + 1]) \
            and not _FIRST_STEP.match(lines[last + 1]) and len(" ".join(lines[index:last + 2])) <= STEPS_MAX_CHARS:
        last += 1
    if last == index:
        return None
    more = last + 1 < len(lines) and _LIST_ITEM.match(lines[last + 1]) and not _FIRST_STEP.match(lines[last + 1])
    # a step a line, as written; "…": the steps go on past what a quote holds
    return Candidate("\n".join(lines[index:last + 1]) + (" …" if more else ""), False, index, last, lines[index],
                     list_run=True, steps=True)


#: A header row holding a number (2023 | 2024, 婚假 | 十三天) may be a table's first data row, and stays quotable.
_DIGIT = re.compile(r"\d|[零一二两三四五六七八九十百千万]")


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
    return not CJK.search(line) and bool(CJK.search(follower)) and bool(_ENDS_SENTENCE.search(follower)) \
        and LETTER.search(line) is not None


def _continues(line: str, follower: str) -> bool:
    """Whether ``follower`` goes on from ``line``: a diagram's flow that
    breaks after an arrow ("→ 超限自动截断 →" / "→ 最接近换行或句号处切断"), or
    the description of a command (``_describes``)."""
    return bool(_ARROW_END.search(line) or _ARROW_START.match(follower)) or _describes(line, follower)


def _whole_sentences(lines: list[str], sentences: list[int]) -> list[Candidate]:
    """A sentence cut into pieces at "；" (``sentences``: each line's sentence number), offered whole too
    when it fits CONTINUATION_MAX_CHARS and no piece after its first is a list item: a rule and its exception
    ("72小时以上取消的，全额退款；72小时以内取消的，不予退款。") answer together."""
    runs = [[i for i, _ in run] for _, run in groupby(enumerate(sentences), key=lambda pair: pair[1])]  # numbers rise
    return [Candidate("".join(lines[i] for i in run), is_item(lines[run[0]]), run[0], run[-1], whole_sentence=True) for run in runs
            if len(run) > 1 and not any(_LIST_ITEM.match(lines[i]) for i in run[1:])
            and len("".join(lines[i] for i in run)) <= CONTINUATION_MAX_CHARS]


def quotable_pieces(text: str) -> list[Candidate]:
    """Quotable pieces of one packed text in reading order: its sentences
    and lines, diagram frames trimmed; a line with a colon inside is offered
    whole (unless a list item follows the colon) and also cut after the
    colon (a lead-in and what follows); a label line (``is_label``: a
    comment, a lead-in, a short heading) is also offered joined to the
    quotable line it introduces, since the question often asks in the
    label's words for what the next line says. Every piece carries whether
    its line is a list item or table row."""
    kept = [(line, sentence) for line, sentence in ((_unframe(piece), sentence) for piece, sentence in text_pieces(text.strip()))
            if line and NON_WORD.sub("", _BOX_DRAWING.sub("", line))]
    lines = [line for line, _ in kept]
    out: list[Candidate] = []
    starts = table_headers(lines)
    for index, line in enumerate(lines):
        item = is_item(line)
        listed = _list_run(lines, index) or _table_run(lines, index, starts) or _steps_run(lines, index)
        if listed:
            out.append(listed)
        if is_label(line):
            # past line numbers of a code listing and code fences, up to the first line with words
            at = next((j for j in range(index + 1, min(len(lines), index + 1 + LABEL_REACH))
                       if LETTER.search(lines[j]) and not FENCE_LINE.match(lines[j])), None)
            follower = lines[at] if at is not None else ""
            # a heading introduces a longer body; a label and its line quoted together must fit a quote
            # a lead-in over a commented block of code introduces the comment and its commands
            end = commented_block(lines, at, at + 1, CONTINUATION_MAX_CHARS) if follower and COMMENT.match(follower) and at + 1 < len(lines) else None
            if end is not None and len(" ".join(lines[index:end + 1])) <= CONTINUATION_MAX_CHARS:
                out.append(Candidate("\n".join(lines[index:end + 1]), False, index, end, line))
            elif follower and quotable(follower) and (_is_lead_in(line) or _is_question(line) or len(follower) > len(line)) \
                    and len(line) + 1 + len(follower) <= CONTINUATION_MAX_CHARS:
                out.append(Candidate(lines_joined([line, follower]), is_item(follower), index, at, line,
                                     header_row=starts.get(at) == at and not _DIGIT.search(follower)))
            block = commented_block(lines, index, at, CONTINUATION_MAX_CHARS) if follower and COMMENT.match(line) else None
            if block is not None:  # a comment over several commands labels all of them ("# 停止服务并备份" + stop + backup)
                out.append(Candidate("\n".join(lines[index:block + 1]), False, index, block, line))
        elif index + 1 < len(lines) and _continues(line, lines[index + 1]) \
                and len(line) + 1 + len(lines[index + 1]) <= CONTINUATION_MAX_CHARS:
            # "→ 超限自动截断 →" / "→ 最接近换行或句号处切断"; a command and the sentence saying what it does:
            # the run of lines that go on from each other, up to CONTINUATION_MAX_CHARS
            last = index + 1
            while last + 1 < len(lines) and _continues(lines[last], lines[last + 1]) \
                    and len(" ".join(lines[index:last + 2])) <= CONTINUATION_MAX_CHARS:
                last += 1
            follower = lines[index + 1]
            out.append(Candidate(lines_joined(lines[index:last + 1]), item, index, last,
                                 follower if _describes(line, follower) else ""))
        header = starts[index] if starts.get(index, index) != index else -1
        pieces = [c.strip() for c in _COLON_SPLIT.split(line) if c.strip()]
        if len(pieces) > 1 and not any(_LIST_ITEM.match(piece) for piece in pieces[1:]):
            # "入口: POST /api/..." whole, which holds its parts (``Candidate.holds``): a value is not quoted
            # without the label saying whose it is ("风控服务 risk-engine：" before "超时后默认放行"); never a
            # lead-in glued to a list item
            out.append(Candidate(line, item, index, index, labelled_line=True))
        # the head of a line cut at its colon ("C维度 (3, w=0.25):") introduces the rest of its own line: never alone
        pieces = [p for i, p in enumerate(pieces) if i == len(pieces) - 1 or not p.endswith(("：", ":"))] or pieces
        names_columns = starts.get(index) == index and not _DIGIT.search(line)
        out.extend(Candidate(piece, item, index, index, header_at=header, header=lines[header] if header >= 0 else "",
                             header_row=names_columns) for piece in pieces)
    return sorted(out + _whole_sentences(lines, [sentence for _, sentence in kept]), key=lambda c: c.first)
