"""What a file parser produces: the document's title and its sections, each
under its heading path, made of text blocks that remember their page.

Parsers are pure functions ``parse(data: bytes, name: str) -> ParsedFile``
raising ``FileParseError`` with a reason a person can act on.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from services.ingest.sentences import count_tokens

#: Shortest run of bare line numbers (1, 2, ...) read as a code listing's gutter.
GUTTER_MIN_LINES = 2
#: Vertical strokes of box-drawing diagrams, which split a line into cells.
_BOX_VERTICALS = "│┃║"
#: Characters that draw a box, an arrow or a gap: a cell of only these holds no text.
_BOX_FRAME = frozenset("─━═┌┐└┘├┤┬┴┼╭╮╯╰╔╗╚╝╠╣╦╩╬▼▲►◄→←↓↑ \t")
#: Two boxes' top or bottom edges side by side, with space between (a table's edges join: ┬ ┴).
_SEPARATE_EDGES = re.compile(r"[┐╮╗] +[┌╭╔]|[┘╯╝] +[└╰╚]")


#: Longest first line read as a title typed as a plain paragraph, in tokens as the chunker counts
#: them (a CJK character, a Latin word or a mark each one: 40 Chinese characters, or an English
#: title such as "STARBRIDGE INFORMATION SECURITY AND ACCESS POLICY"), and in characters.
TITLE_LINE_MAX_TOKENS = 40
TITLE_LINE_MAX_CHARS = 120
_ENDS_SENTENCE = re.compile(r"[。！？；.!?;:：，,]$")


class FileParseError(ValueError):
    """A file that cannot be turned into text (encrypted, scanned without a
    text layer, corrupt); the message is the reason reported for the file."""


@dataclass(slots=True)
class Block:
    """A paragraph, list item, table row group or code block.

    Attributes:
        text: its text (a table: one line per row, cells joined by " | ").
        page: 1-based page it starts on (PDF), None for formats without pages.
    """

    text: str
    page: int | None = None


@dataclass(slots=True)
class Section:
    """Blocks under one heading path (outermost heading first; [] before the
    first heading)."""

    heading_path: list[str]
    blocks: list[Block] = field(default_factory=list)


@dataclass(slots=True)
class ParsedFile:
    """A parsed file.

    Attributes:
        title: the document's title (its own title, first top heading, or file name).
        sections: in reading order; sections without text are left out.
        media_type: the media type it was parsed as.
        pages: number of pages (PDF), else 0.
        metadata: what the file says about itself (e.g. "author").
    """

    title: str
    sections: list[Section]
    media_type: str
    pages: int = 0
    metadata: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        """All text in reading order, each section after its headings."""
        parts = []
        for section in self.sections:
            if section.heading_path:
                parts.append(" / ".join(section.heading_path))
            parts.extend(b.text for b in section.blocks)
        return "\n".join(parts)


class SectionBuilder:
    """Collects blocks under a heading stack: ``heading(level, text)`` opens
    a section (closing deeper ones), ``add(text, page)`` adds a block."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []
        self.sections: list[Section] = []
        self.first_heading = ""

    def heading(self, level: int, text: str, *, numbered: bool = False) -> None:
        """Opens a section under ``text`` at ``level`` (1 = outermost);
        a ``numbered`` section heading ("一、总则") is never taken as the
        document's title (``first_heading``)."""
        text = " ".join(text.split())
        if not text:
            return
        if not numbered:
            self.first_heading = self.first_heading or text
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, text))
        self.sections.append(Section([t for _, t in self._stack]))

    def continue_heading(self, text: str) -> None:
        """Appends ``text`` to the heading opened last, which holds no block yet: the next line of a heading
        that wrapped (a PDF's long title set over three lines made three headings, two of them chunks that
        held only their own words)."""
        text = " ".join(text.split())
        if not text or not self._stack or not self.sections or self.sections[-1].blocks:
            return
        level, opened = self._stack[-1]
        joined = f"{opened} {text}" if opened[-1:].isascii() and text[:1].isascii() else opened + text
        self._stack[-1] = (level, joined)
        self.sections[-1].heading_path[-1] = joined
        if self.first_heading == opened:
            self.first_heading = joined

    def add(self, text: str, page: int | None = None) -> None:
        """Adds a block of ``text`` (blank text is dropped, line-number
        gutters removed: ``without_line_number_gutters``) to the open section."""
        text = side_by_side_boxes_as_columns(without_line_number_gutters(text)).strip()
        if not text:
            return
        if not self.sections:
            self.sections.append(Section([]))
        self.sections[-1].blocks.append(Block(text, page))

    def build(self) -> list[Section]:
        """The sections that hold text. A heading with no text and no
        sub-heading under it (an empty last section, a heading straight
        followed by the next one's sibling) holds its own title as text, so
        that the title is not lost."""
        for section, following in zip(self.sections, [*self.sections[1:], None]):
            path = section.heading_path
            if not section.blocks and path and (following is None or following.heading_path[:len(path)] != path
                                                or len(following.heading_path) == len(path)):
                section.blocks.append(Block(path[-1]))
        return [s for s in self.sections if s.blocks]


#: Authors that writing libraries put in a file by default (python-docx's "python-docx", reportlab's
#: "(anonymous)"): not a person, so not stored as the document's author.
PLACEHOLDER_AUTHORS = frozenset({"(anonymous)", "anonymous", "python-docx", "unknown", "author"})


def author_metadata(author: str) -> dict[str, str]:
    """{"author": author} for a file's stated author, {} when it states none
    or a writer's placeholder (PLACEHOLDER_AUTHORS)."""
    author = author.strip()
    return {"author": author} if author and author.lower() not in PLACEHOLDER_AUTHORS else {}


def title_line(sections: list[Section]) -> str:
    """A title typed as a plain first paragraph: when the text before the
    first heading is one short line (at most TITLE_LINE_MAX_TOKENS and
    TITLE_LINE_MAX_CHARS, not ending like a sentence or a lead-in) and
    headed sections follow it,
    that line; else "". The reader then takes it as the document's title
    and leaves its section out (the title heads every chunk; a chunk of the
    title alone would be quoted as an answer)."""
    if len(sections) < 2 or sections[0].heading_path or len(sections[0].blocks) != 1:
        return ""
    text = sections[0].blocks[0].text.strip()
    return text if could_be_title(text) else ""


def could_be_title(text: str) -> bool:
    """Whether ``text`` could be a title: one line, at most TITLE_LINE_MAX_TOKENS and TITLE_LINE_MAX_CHARS,
    not ending like a sentence or a lead-in."""
    return bool(text) and "\n" not in text and len(text) <= TITLE_LINE_MAX_CHARS \
        and count_tokens(text) <= TITLE_LINE_MAX_TOKENS and not _ENDS_SENTENCE.search(text)


def _cells(line: str) -> list[str]:
    for vertical in _BOX_VERTICALS[1:]:
        line = line.replace(vertical, _BOX_VERTICALS[0])
    return line.split(_BOX_VERTICALS[0])


def _has_text(cell: str) -> bool:
    return any(ch not in _BOX_FRAME for ch in cell)


def side_by_side_boxes_as_columns(text: str) -> str:
    """``text`` with the boxes of a box-drawing diagram that stand side by
    side read one box after another instead of line by line across them.

    Consecutive lines cut by the same number (at least 3) of vertical
    strokes (│ ┃ ║) are one row of boxes; its cells are columns. They are
    boxes side by side when the line above or below them draws two boxes'
    edges with space between (┐  ┌ or ┘  └) and every two columns holding
    text have a column without text (blank, or only an arrow) between them.
    Then each text column's lines are written out in turn, top to bottom,
    left column first, without the strokes. Otherwise (a table, whose edges
    join with ┬ ┼ ┴; a sequence diagram's lifelines) the lines stay as they
    are. Read line by line, the boxes' words interleave ("阶段2: 粗检索 │ │
    阶段3: Graphiti精炼"), so no box's text is whole for the embedder, the
    keyword index or a quote of the extractive answer."""
    if not any(v in text for v in _BOX_VERTICALS):
        return text
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        cells = _cells(lines[i])
        j = i + 1
        while len(cells) >= 4 and j < len(lines) and len(_cells(lines[j])) == len(cells):
            j += 1
        edges = [lines[k] for k in (i - 1, j) if 0 <= k < len(lines)]
        if len(cells) < 4 or j - i < 2 or not any(_SEPARATE_EDGES.search(edge) for edge in edges):
            out.extend(lines[i:j])
            i = j
            continue
        rows = [_cells(line) for line in lines[i:j]]
        texts = [k for k in range(len(cells)) if any(_has_text(row[k]) for row in rows)]
        gapped = len(texts) >= 2 and all(b > a + 1 for a, b in zip(texts, texts[1:]))
        if gapped:
            out.extend(row[k].strip() for k in texts for row in rows if _has_text(row[k]))
        else:
            out.extend(lines[i:j])
        i = j
    return "\n".join(out)


def without_line_number_gutters(text: str) -> str:
    """``text`` without the line numbers of copied code listings: a run of
    at least GUTTER_MIN_LINES lines reading exactly 1, 2, 3, ... (a web
    page's or PDF's gutter column, pasted before the code it numbers) is
    dropped when it starts the text or follows a line that is not a bare
    number, and the next two lines of the same block are not bare numbers
    (the code it numbered). A count that ends the
    block (program output such as ``seq 3``, a column of ids) or goes on
    into other numbers (1 2 3 5 8) is content and kept, as is every other
    line. The gutter is noise to every channel: numbers for keyword search,
    text for the embedder, lines an extractive answer could quote."""
    lines = text.split("\n")
    bare = [line.strip().isdigit() for line in lines]
    keep: list[str] = []
    i = 0
    while i < len(lines):
        run = 0
        while i + run < len(lines) and lines[i + run].strip() == str(run + 1):
            run += 1
        after = i + run
        code_lines = 0
        while after < len(lines) and code_lines < 2 and not bare[after]:
            code_lines += 1
            after += 1
        if run >= GUTTER_MIN_LINES and (i == 0 or not bare[i - 1]) and code_lines == 2:
            i += run
            continue
        keep.append(lines[i])
        i += 1
    return "\n".join(keep)
