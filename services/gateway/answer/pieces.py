"""A quotable piece of a packed text (``Candidate``): what
services.gateway.answer.quotable cuts a text into and
services.gateway.answer.extractive scores and quotes; and the table rows
that go with chosen pieces (``headers_of``, ``table_after``)."""
from __future__ import annotations

from dataclasses import dataclass


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
        whole_sentence: the piece is a sentence of several pieces joined
            back (cut at "；"), ranked before its pieces when it answers as
            well as they do.
        labelled_line: the piece is a whole line with a label before its colon
            ("风控服务 risk-engine：同步调用…"), offered beside its parts; it
            holds them (``holds``), so a value is never quoted without the
            label that says whose it is.
        header_row: the piece is a table's header row without a number: it
            names columns and answers nothing alone, so it is quoted only
            with a row of its table (a number in it may make it a first
            data row: 婚假 | 十三天).
        steps: a list_run of numbered steps from the first, with no lead-in
            (``quotable._steps_run``): offered when the question asks how
            to do something (``asks_steps``).
    """

    text: str
    item: bool
    first: int
    last: int
    label: str = ""
    list_run: bool = False
    header_at: int = -1
    header: str = ""
    header_row: bool = False
    whole_sentence: bool = False
    labelled_line: bool = False
    steps: bool = False

    def holds(self, other: "Candidate") -> bool:
        """Whether ``other`` is one of this whole sentence's clauses (or lines), or a part of this labelled
        line, which is then never quoted alone: half a rule can read as its opposite ("金卡会员可免费延迟至
        16:00；" without "节假日期间不适用此项优惠。"), and a value without its label says nothing of whose it is."""
        inside = self.first <= other.first and other.last <= self.last and other is not self
        if self.whole_sentence:
            return inside and not other.whole_sentence
        return self.labelled_line and inside and not other.labelled_line and not other.whole_sentence

    def overlaps(self, other: "Candidate") -> bool:
        """Whether the two pieces share a line of their text."""
        return self.first <= other.last and other.first <= self.last


def headers_of(chosen: list[Candidate]) -> list[Candidate]:
    """The header rows of the table rows among ``chosen`` that no chosen
    piece already covers, each once, as pieces of their own line."""
    wanted = {c.header_at: c.header for c in chosen if c.header_at >= 0 and not c.list_run}
    return [Candidate(text, True, at, at) for at, text in sorted(wanted.items())
            if not any(c.first <= at <= c.last for c in chosen)]


#: Most characters of a table quoted whole after the sentence that introduces it (``table_after``).
TABLE_MAX_CHARS = 320


def table_after(lead: Candidate, found: list[Candidate]) -> list[Candidate]:
    """The data rows of the table whose header row is the line right after
    ``lead`` (a sentence that introduces it: "住宿费按城市等级实行限额报销。"
    above a city-tier table), when header and rows together fit in
    TABLE_MAX_CHARS; [] otherwise."""
    return table_rows(lead.last + 1, found)


def table_rows(header_at: int, found: list[Candidate]) -> list[Candidate]:
    """The data rows of ``found`` under the header row at line ``header_at``, each once, when header and rows
    together fit in TABLE_MAX_CHARS; [] otherwise."""
    rows = [c for c in found if c.header_at == header_at and c.item and not c.header_row and c.first == c.last]
    rows = list({c.first: c for c in rows}.values())
    size = sum(len(c.text) for c in rows) + (len(rows[0].header) if rows else 0)
    return rows if rows and size <= TABLE_MAX_CHARS else []
