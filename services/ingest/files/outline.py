"""Numbered section headings of a plain-text file: which lines such as
"4. 配额引擎", "13.2 可选服务", "一、总体要求" or "（一）适用范围" are
headings, and which are list items, a table of contents or numbers in prose.

Levels follow the numbering of Chinese official documents (GB/T 9704:
一、 > （一） > 1. > （1）), with dotted Arabic numbers one level deeper per
part (1. > 1.1 > 1.1.1). A line is a heading when its number continues the
outline read so far (``Outline.follows``); lines that cannot be told from a
list by their number alone are judged by their neighbours:

- two siblings on consecutive lines (1. Linux / 2. macOS) are list items;
- numbered lines with no text between them that come again later (number and
  title) are a table of contents' entries;
- a list restarting at 1 under the same heading (1. 安装 ... 1. Linux 2. macOS)
  claims the numbers that continue it, so its items never take the place of
  the next section;
- one numbered line left out by its form is passed over when the next
  heading's number skips exactly it; ending like a lead-in (2. 安装步骤：), it
  is taken back as the heading it was.

A file with fewer than two numbered headings has none: one "1." line is a
list of one.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from services.common.numbers import chinese_to_int

#: Level of the first number of each style (a dotted Arabic number adds one per further part).
CHINESE, CHINESE_PAREN, ARABIC, ARABIC_PAREN = 0, 1, 2, 6
_CN = "一二三四五六七八九十"
_STYLES = (
    (CHINESE, re.compile(rf"^([{_CN}]{{1,3}})、\s*(\S.*)$")),
    (CHINESE_PAREN, re.compile(rf"^[（(]([{_CN}]{{1,3}})[)）]\s*(\S.*)$")),
    (ARABIC_PAREN, re.compile(r"^[（(](\d{1,2})[)）]\s*(\S.*)$")),
    # "4." / "4、" / "4．" (not "2.5元"), "13.2 标题", "1 范围" (GB/T standards number without a dot)
    (ARABIC, re.compile(r"^(\d{1,3}(?:\.\d{1,3}){0,3})(?:[.、．](?!\d)\s*|\s+)(\S.*)$")),
)
#: A numbered line this long, or ending like a sentence, is a list item or prose, not a heading.
MAX_HEADING_CHARS = 60
_SENTENCE_END = tuple("。；;，,！!？?")
_LEAD_IN_END = tuple("：:")
#: A title starting with a unit is a quantity ("1.2 倍于基准", "3 个工作日"), not a section.
_UNIT_START = re.compile(r"^(?:[%％倍元角分个位名人次条项件台天日月年周岁吨米克升度秒万亿千百十]|[kKmMgG][bBgGmM]?\b|ms\b|s\b)")
_FORMULA = re.compile(r"[=*→←]|──")
#: Added to a numbered heading's level by the file readers: below every level of their own
#: (第…编/章/节 1-3, Word's Heading 1-9, PDF font sizes), which only compare levels.
READER_LEVEL_OFFSET = 10
#: Fewer numbered headings than this in a file is no outline.
MIN_HEADINGS = 2


@dataclass(frozen=True, slots=True)
class Numbered:
    """A line that starts with a section number.

    Attributes:
        index: the line's index in the file.
        level: the level of its last number (``CHINESE`` ... ``ARABIC`` + depth - 1).
        parts: the number, outermost part first ((13, 2) for "13.2").
        heading_form: False when its form rules it out as a heading (too long, ends
            like a sentence or a lead-in, a quantity or a formula); it can still
            end a list or be taken back as a skipped heading.
    """

    index: int
    level: int
    parts: tuple[int, ...]
    heading_form: bool
    lead_in: bool
    title: str

    @property
    def first_level(self) -> int:
        return self.level - len(self.parts) + 1


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t\u3000"))


def numbered_line(index: int, line: str) -> Numbered | None:
    """The section number of ``line`` (its leading indentation ignored), or
    None when it does not start with one."""
    text = line.strip(" \t\u3000\r")
    for base, pattern in _STYLES:
        m = pattern.match(text)
        if not m:
            continue
        title = m.group(2)
        quantity = False
        if base == ARABIC:
            parts = tuple(int(n) for n in m.group(1).split("."))
            # "1.2 倍" or "3 个" read as a quantity; after "1." or "1、" a title may start with any word (人员配置)
            quantity = text[len(m.group(1))] not in ".、．" and bool(_UNIT_START.match(title))
            if len(parts) == 1 and quantity:
                return None
        else:
            value = chinese_to_int(m.group(1)) if base in (CHINESE, CHINESE_PAREN) else int(m.group(1))
            if not value:
                return None
            parts = (value,)
        form = (len(text) <= MAX_HEADING_CHARS and not title.endswith(_SENTENCE_END + _LEAD_IN_END)
                and not quantity and not _FORMULA.search(title))
        return Numbered(index, base + len(parts) - 1, parts, form, title.endswith(_LEAD_IN_END), title.strip())
    return None


class Outline:
    """The numbers of the headings read so far, by level."""

    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}

    def expected(self, line: Numbered) -> int:
        """The number ``line``'s last part must have to continue the outline."""
        return self.numbers.get(line.level, 0) + 1

    def parents_match(self, line: Numbered) -> bool:
        """Whether a dotted number's leading parts are the open headings' ("2.3"
        under "2."), or none is open at those levels ("1.1" first under 第一章)."""
        own = [self.numbers.get(level) for level in range(line.first_level, line.level)]
        return own == list(line.parts[:-1]) or (all(n is None for n in own) and line.parts[-1] == 1)

    def follows(self, line: Numbered, skipped: int = 0) -> bool:
        """Whether ``line`` is the next section: the next sibling of an open
        level or the first child of one (``skipped`` numbers left out)."""
        return self.parents_match(line) and line.parts[-1] == self.expected(line) + skipped

    def open(self, line: Numbered) -> None:
        """Takes ``line`` as the current heading: its levels set, deeper ones closed."""
        for level, number in zip(range(line.first_level, line.level + 1), line.parts):
            self.numbers[level] = number
        for level in [lv for lv in self.numbers if lv > line.level]:
            del self.numbers[level]


def _sibling(a: Numbered, b: Numbered) -> bool:
    return b.level == a.level and b.parts[:-1] == a.parts[:-1] and b.parts[-1] == a.parts[-1] + 1


#: A table of contents' dot leaders and page number after an entry's title ("简介 ........ 3").
_LEADER = re.compile(r"(?:[.．·…\-_\s]{2,}|\s+)\d{1,4}$")
#: The title line of a table of contents.
_CONTENTS_TITLE = re.compile(r"^\s*(?:目\s*录|目\s*次|contents|table of contents)\s*[:：]?\s*$", re.IGNORECASE)


def _entry_key(line: Numbered) -> tuple:
    return line.parts, _LEADER.sub("", line.title).strip()


def _runs(numbered: list[Numbered], lines: list[str]) -> list[list[Numbered]]:
    """Runs of numbered lines with no other text between them, in order."""
    by_index = {n.index: n for n in numbered}
    runs: list[list[Numbered]] = [[]]
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if i in by_index:
            runs[-1].append(by_index[i])
        elif runs[-1]:
            runs.append([])
    return [run for run in runs if run]


def _contents_entries(numbered: list[Numbered], lines: list[str]) -> set[int]:
    """Indices of the lines of runs of two or more numbered lines that come
    again later in the file (number and title, dot leaders and page numbers
    left out): a table of contents' entries."""
    later: Counter[tuple] = Counter(_entry_key(n) for n in numbered)
    out: set[int] = set()
    for run in _runs(numbered, lines):
        for n in run:
            if len(run) >= 2 and later[_entry_key(n)] >= 2:
                out.add(n.index)
            later[_entry_key(n)] -= 1
    return out


def _not_headings(numbered: list[Numbered], lines: list[str]) -> set[int]:
    """Indices of numbered lines that are list items or a table of contents
    by their neighbours: two siblings of heading form on consecutive
    non-blank lines, and a table of contents' entries (``_contents_entries``)."""
    out = _contents_entries(numbered, lines)
    for run in _runs(numbered, lines):
        for a, b in zip(run, run[1:]):
            if _sibling(a, b) and a.heading_form and b.heading_form:
                out.update((a.index, b.index))
    return out


def table_of_contents(lines: list[str], headings: set[int] | None = None) -> set[int]:
    """Indices of the lines of a table of contents typed into the text: its
    numbered entries that come again later as section headings (number and
    title; ``headings``: the indices of the file's heading lines, default
    its numbered outline, ``numbered_headings``), and its title line (目录,
    Contents) just before them. They are navigation, not content: a reader
    leaves them out, as the HTML reader leaves out a page's navigation, so
    no chunk of entries outranks the sections. Numbered lines that come
    again as anything but headings (a questionnaire's 1. 是 / 2. 否 under
    every question) are content and stay."""
    numbered = [n for i, line in enumerate(lines) if (n := numbered_line(i, line))]
    if headings is None:
        headings = set(numbered_headings(lines))
    as_heading = {_entry_key(n) for n in numbered if n.index in headings}
    by_index = {n.index: n for n in numbered}
    entries = {i for i in _contents_entries(numbered, lines) if _entry_key(by_index[i]) in as_heading}
    out = set(entries)
    for first in sorted(entries):
        before = next((j for j in range(first - 1, -1, -1) if lines[j].strip()), None)
        if before is not None and _CONTENTS_TITLE.match(lines[before]):
            out.add(before)
    return out


def numbered_headings(lines: list[str], resets: set[int] = frozenset()) -> dict[int, int]:
    """{line index: level} of the numbered section headings among ``lines``
    (levels from 0, ``CHINESE``; see the module doc). ``resets``: indices of
    lines that close every numbered level (a 第…章 chapter heading: numbering
    restarts under it). Lines indented deeper than most of the file's lines
    are never headings."""
    indents = Counter(_indent(line) for line in lines if line.strip())
    usual_indent = indents.most_common(1)[0][0] if indents else 0
    numbered = [n for i, line in enumerate(lines) if _indent(line) <= usual_indent and (n := numbered_line(i, line))]
    in_runs = _not_headings(numbered, lines)
    found: dict[int, int] = {}
    outline = Outline()
    list_level: int | None = None  # a list restarted at 1 under the current heading, and its next number
    list_next = 0
    passed: dict[tuple, Numbered] = {}  # numbered lines since the last heading, not taken, by (level, number)
    reset_points = sorted(resets)
    for line in numbered:
        if reset_points and reset_points[0] < line.index:
            while reset_points and reset_points[0] < line.index:
                reset_points.pop(0)
            outline, list_level, passed = Outline(), None, {}
        if list_level == line.level and line.parts[-1] == list_next:
            list_next += 1  # the restarted list goes on: an item, whatever the outline expects
            continue
        # a line with the number this one skips, left out by its form: a lead-in ("2. 安装步骤：") is
        # the skipped heading; a quantity ("1.2 倍于基准") was never one, but the outline goes on past it
        skipped = passed.get((line.level, (*line.parts[:-1], line.parts[-1] - 1)))
        skipped = skipped if skipped and outline.follows(skipped) else None
        if line.heading_form and line.index not in in_runs and (
                outline.follows(line) or (skipped and outline.follows(line, skipped=1))):
            if skipped and not outline.follows(line):
                if skipped.lead_in:
                    found[skipped.index] = skipped.level
                outline.open(skipped)
            found[line.index] = line.level
            outline.open(line)
            list_level, passed = None, {}
            continue
        if line.parts[-1] == 1 and line.level in outline.numbers and len(line.parts) == 1:
            list_level, list_next = line.level, 2  # 1. again under the same heading: a list
        passed[line.level, line.parts] = line
    return found if len(found) >= MIN_HEADINGS else {}


#: A chapter line of a Chinese document ("第一章 总则", 第…编 / 章 / 节), with its level (编 1, 章 2, 节 3); the
#: space may be missing ("第一章总则": a PDF's text layer drops it), but not a sentence ("第三章的规定适用…。").
CHAPTER = re.compile(r"^\s*第[一二三四五六七八九十百千零〇两0-9]+([编章节])(?:\s*[^\s，。；：,;:、的].{0,40}?)?\s*(?<![。；，,;])$")
CHAPTER_LEVEL = {"编": 1, "章": 2, "节": 3}


def outline_headings(lines: list[str]) -> dict[int, int]:
    """{line index: level} of the headings of a file whose headings are not marked (a .txt, a .docx without
    heading styles, a PDF whose headings are set at the body's size): its chapter lines (``CHAPTER``: levels
    1 to 3) and the numbered headings under them (``numbered_headings``, at READER_LEVEL_OFFSET + level;
    numbering restarts under each chapter)."""
    chapters = {i: CHAPTER_LEVEL[m.group(1)] for i, line in enumerate(lines) if (m := CHAPTER.match(line))}
    headings = {i: READER_LEVEL_OFFSET + level for i, level in numbered_headings(lines, set(chapters)).items()}
    headings.update(chapters)
    return headings
