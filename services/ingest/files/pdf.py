"""PDF files through pypdf: the text layer of every page, with headings
found by font size and table rows rebuilt from text positions.

- Encrypted: opened when the empty user password opens it (owner-only
  protection); otherwise the file fails: "encrypted PDF: needs a password".
- No text on any page (a scan): fails: "no text layer (scanned PDF?)";
  OCR is out of scope.
- Lines: text runs on one baseline (within a third of the font size) make
  one line, ordered left to right; a horizontal gap wider than
  GAP_EMS x the font size between runs separates table cells (" | "), and
  so does a run that starts where such a gap starts a column on two other
  lines of the page (the gap is estimated from character counts).
- A table cell too narrow for its text wraps: the line below holding only
  its rest (in the same column, at the row's line spacing) is joined to
  the row, so "员工办公Wi-F" and "i" are one cell again.
- Headings: lines whose font size is at least HEADING_RATIO x the body size
  (the size most characters have) and at most MAX_HEADING_CHARS long, and
  sub-headings only a little larger (SUBHEADING_RATIO, e.g. 13 pt over a
  12 pt body) when they also stand alone: short and not ending like a
  sentence or a clause. The largest size is level 1, the next level 2, and
  so on. A file with no larger line (headings set in the body's size, as
  official documents often are) takes its numbered lines that run as an
  outline ("一、总体要求", "2.1 范围"; ``outline.numbered_headings``).
- A table of contents (numbered entries, dot leaders and page numbers,
  that come again as the sections) is left out.
- Every block keeps its 1-based page number.
- Control characters in the text layer are dropped: pypdf reads some
  CJK fonts (a Type0 font whose encoding is an embedded Identity CMap, as
  fpdf2 writes them) with a NUL before every character, and no text holds
  one on purpose.
- CJK radicals are read as the characters they stand for (``unified``):
  Chromium's PDFs map 工, 用, 门 and 飞 to the Kangxi radicals ⼯ ⽤ and the
  supplement's ⻔ ⻜, which look the same and match no query, quote or gold
  passage written with the characters.
"""
from __future__ import annotations

import io
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from yosina import make_transliterator

from services.common.numbers import quantities
from services.ingest.files.model import FileParseError, ParsedFile, SectionBuilder, author_metadata
from services.ingest.files.outline import READER_LEVEL_OFFSET, outline_headings, table_of_contents

MEDIA_TYPE = "application/pdf"
HEADING_RATIO = 1.2
SUBHEADING_RATIO = 1.05
MAX_HEADING_CHARS = 60
GAP_EMS = 0.8
#: A table cell's wrapped line sits at most this many font sizes below the line before it.
WRAP_LEADING = 1.6
#: A wrapped cell's text reaches to within this many ems of the next cell's start.
WRAP_EMS = 2.5
#: A cell's second line (a line break in the cell: "20000元" over "（40%）") sits at most this many font sizes
#: below its first, closer than a table's rows stand apart (their cells' padding).
CELL_LINE_LEADING = 1.25
#: C0 control characters but tab, line feed and carriage return (the text runs' whitespace).
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: A PDF title that is a file name (bm.html, report.docx): what a browser or converter puts when the page
#: has no title of its own.
_FILE_NAME_TITLE = re.compile(r"[^/\\]+\.(?:x?html?|docx?|txt|md|pdf)", re.I)
#: The CJK Radicals Supplement and Kangxi Radicals blocks.
_RADICALS = re.compile(r"[\u2e80-\u2fdf]")
_RADICALS_TO_CHARACTERS = make_transliterator([("radicals", {})])
#: Radicals the table leaves out (Unicode lists no equivalent ideograph for them) that PDFs use for a
#: character: Chromium writes 部门 as 部⻔ (U+2ED4 CJK RADICAL C-SIMPLIFIED GATE).
_MORE_RADICALS = str.maketrans({"\u2ed4": "\u95e8"})
#: Kangxi radicals whose equivalent is a traditional character where simplified Chinese shares the radical's
#: glyph: Chromium's simplified fonts write 户 (客户) as ⼾ U+2F3E, which the table reads as 戶. Chinese first:
#: simplified.
_SIMPLIFIED_RADICALS = str.maketrans({"\u2f3e": "\u6237"})


def unified(text: str) -> str:
    """``text`` with each CJK radical that stands for a character (⼯ U+2F2F, ⻜ U+2EDC) replaced by the
    character (工, 飞), by yosina's radicals table (Unicode's equivalent unified ideographs) and
    _MORE_RADICALS; unchanged when it holds none."""
    if not _RADICALS.search(text):
        return text
    return _RADICALS_TO_CHARACTERS(text.translate(_SIMPLIFIED_RADICALS)).translate(_MORE_RADICALS)


@dataclass(slots=True)
class _Run:
    text: str
    x: float
    y: float
    size: float
    spaced: bool = False  # the run's text began with whitespace: a word boundary before it


@dataclass(slots=True)
class _Line:
    text: str
    size: float
    page: int


def _width(text: str, size: float) -> float:
    """Estimated advance of ``text`` at ``size``: one em for wide (CJK)
    characters, half an em for others."""
    return sum(size if unicodedata.east_asian_width(ch) in ("W", "F") else 0.5 * size for ch in text)


def _page_lines(page, number: int) -> list[_Line]:
    runs: list[_Run] = []

    def visit(text, cm, tm, font_dict, font_size) -> None:
        text = unified(_CONTROLS.sub("", text))
        if not text.strip() or tm is None or cm is None:
            return
        scale = abs(tm[3] * cm[3]) or 1.0
        runs.append(_Run(" ".join(text.split()), tm[4] * cm[0] + cm[4], tm[5] * cm[3] + cm[5], float(font_size) * scale,
                         text[:1].isspace()))

    page.extract_text(visitor_text=visit)
    lines: list[list[_Run]] = []
    for run in runs:  # content-stream order; a line is runs on one baseline
        for line in lines:
            if abs(line[0].y - run.y) <= max(line[0].size, run.size) / 3:
                line.append(run)
                break
        else:
            lines.append([run])
    ordered = sorted(lines, key=lambda ln: -ln[0].y)
    for i, line in enumerate(ordered):
        line.sort(key=lambda r: r.x)
        ordered[i] = line = _fill_placeholders(line)
        _advance_stale_starts(line)
    columns = _column_starts(ordered)
    rows: list[_Cells] = []
    for line in ordered:
        cells = [[line[0].x, line[0].text, line[0].x + _width(line[0].text, line[0].size)]]
        prose = _crosses_columns(line, columns)
        for prev, run in zip(line, line[1:]):
            if _wide_gap(prev, run) or (not prose and _starts_column(prev, run, columns)):
                cells.append([run.x, run.text, run.x + _width(run.text, run.size)])
            else:
                # Chromium puts the space between two words at the start of the second's run: "QF-LS-09" + " must"
                # (between CJK text and a number pypdf reports one too where the source has none: not kept)
                words = cells[-1][1][-1:].isascii() and cells[-1][1][-1:].isalnum() and run.text[:1].isascii() \
                    and run.text[:1].isalnum()
                if len(cells) == 1 and prev is line[0] and _LIST_MARKER.fullmatch(cells[-1][1]) \
                        and run.x - cells[-1][2] >= MARKER_GAP_EMS * prev.size and not _counts(prev.text, run.text):
                    cells[-1][1] = _marker(cells[-1][1]) + " "  # a list's number set apart from its text ("1Call")
                    words = False
                cells[-1][1] += (" " if run.spaced and words else "") + run.text
                cells[-1][2] = run.x + _width(run.text, run.size)
        row = _Cells(cells, line[0].y, max(r.size for r in line))
        if rows and _continues(rows[-1], row):
            rows[-1].merge(row)
        else:
            if rows and _centred_above(rows[-1], row, columns):
                row.cells += rows.pop().cells  # the first line of a wrapped last cell, set above the row's middle
            rows.append(row)
    return [_Line(" | ".join(c[1] for c in row.cells), row.size, number) for row in rows]


#: Punctuation a writer may set in a fallback font, leaving a space for it in the run of the main font.
_PLACED_PUNCTUATION = re.compile(r"[\s\u2018-\u201f\u2026\u2014\u2013\u00b7'\"]+")
#: How near, in ems, a punctuation run's start must be to a space of the run before it to be that space.
PLACEHOLDER_EMS = 0.75


def _fill_placeholders(line: list[_Run]) -> list[_Run]:
    """``line`` (sorted by x) with each run of punctuation only that starts at a space of the run before it
    put in that space, and in the next spaces after it for its next groups of marks. LibreOffice sets the curly quotes
    of CJK text in a Latin font: the CJK run holds a space where each goes ("国家助学金和 三" then "助 岗位
    津贴"), and the quotes come as runs of their own at those spaces' x ("“" at the first, "”" at the
    second), so 和“三助”岗位津贴 read as 和 三“助 岗位津贴 … 招生”."""
    out: list[_Run] = []
    for run in line:
        host = out[-1] if out else None
        marks = run.text.split()  # one group per space it fills: "“ ”“ ”" after "为 同意 修改 三"
        if host is not None and marks and _PLACED_PUNCTUATION.fullmatch(run.text):
            filled = _filled(host, run.x, marks)
            if filled is not None:
                host.text = filled
                continue
        out.append(run)
    return out


def _filled(host: _Run, x: float, marks: list[str]) -> str | None:
    """``host``'s text with ``marks`` (groups of marks) put in its space nearest ``x`` (within
    PLACEHOLDER_EMS) and the spaces after it, one group each; None when there is no such space or too few
    spaces after it."""
    at, start = None, host.x
    for i, ch in enumerate(host.text):
        if ch == " " and abs(start - x) <= PLACEHOLDER_EMS * host.size:
            at = i
            break
        start += _width(ch, host.size)
    if at is None:
        return None
    spaces = [i for i, ch in enumerate(host.text) if ch == " " and i >= at][:len(marks)]
    if len(spaces) < len(marks):
        return None
    chars = list(host.text)
    for i, mark in zip(spaces, marks):
        chars[i] = mark
    return "".join(chars)


#: A list item's marker set as a run of its own before the item's text: a number, a letter, a bullet.
_LIST_MARKER = re.compile(r"[(（]?\d{1,2}[.)）、]?|[(（]?[a-zA-Z][.)）]|[•·\-–*]")
#: The gap, in ems, after which such a marker stands apart from the text after it.
MARKER_GAP_EMS = 0.3


def _counts(number: str, after: str) -> bool:
    """Whether ``number`` and the text ``after`` it read as a quantity with its unit ("40" then "小时。", at the
    start of a wrapped line): no list marker then."""
    return any(unit for _, unit in quantities(number + after[:6]))


def _marker(text: str) -> str:
    """A list marker as the readers write one: a bare number with a full stop ("1" -> "1."), as a Markdown or
    Word list item reads, so that the item is read as one; any other marker as it is."""
    return f"{text}." if text.isdigit() else text


#: A gap after CJK text, in ems, below which a run is the text's next word, wherever it starts: CJK widths
#: are exact, and LibreOffice sets a fifth of an em between CJK text and digits ("每年 30000元").
CJK_WORD_GAP_EMS = 0.3


def _starts_column(prev: _Run, run: _Run, columns: list[float]) -> bool:
    """Whether ``run`` starts a cell by starting at one of the page's table ``columns`` (``_column_starts``),
    though its gap from ``prev`` is not wide: not when ``prev`` ends in CJK text and the gap is under
    CJK_WORD_GAP_EMS (a 30000 in a sentence that started at a table's column x, a "/年）" after "资助标准（元")."""
    if not any(abs(run.x - x) <= COLUMN_TOLERANCE for x in columns):
        return False
    wide = unicodedata.east_asian_width(prev.text[-1:] or " ") in ("W", "F")
    return not (wide and run.x - (prev.x + _width(prev.text, prev.size)) < CJK_WORD_GAP_EMS * prev.size)


def _crosses_columns(line: list[_Run], columns: list[float]) -> bool:
    """Whether some run of ``line`` spans one of the page's table ``columns`` (the column's x half an em or
    more inside its text): a line of prose that the columns of a table above or below must not cut ("东大研
    〔2024〕9 号", whose 号 stands where a table's column starts)."""
    return any(run.x + 0.5 * run.size < x < run.x + _width(run.text, run.size) - 0.5 * run.size
               for run in line for x in columns)


def _advance_stale_starts(line: list[_Run]) -> None:
    """Moves each run of ``line`` (sorted by x) that starts where the run before it starts, or inside
    that run's CJK text, to its estimated end. Chromium's PDFs place every glyph on its own, and pypdf
    reports some at the x of the glyph before (上 and 或 both at 288.9, 夜 at 320.9; 提 at 351.2 after
    期未 at 319.2): read as they are, the glyph after each seemed to follow a gap of an em, every such x
    became a table column, and paragraphs were cut into cells and joined to the next line as wrapped
    cells. No two runs of one line start at one x on purpose, and a CJK character's advance is one em,
    so a run starting well inside one was misplaced (Latin widths are estimates: left as they are)."""
    for prev, run in zip(line, line[1:]):
        end = prev.x + _width(prev.text, prev.size)
        inside_cjk = all(unicodedata.east_asian_width(ch) in ("W", "F") for ch in prev.text) \
            and run.x < end - STALE_OVERLAP_EMS * prev.size
        if run.x <= prev.x + STALE_START_POINTS or inside_cjk:
            run.x = end


#: A run starting within this many points of the run before it on its line starts where that one does.
STALE_START_POINTS = 0.01
#: A run starting this many ems or more before the end of the CJK run before it is misplaced.
STALE_OVERLAP_EMS = 0.25
#: Points within which a run starts at a table column's start (``_column_starts``).
COLUMN_TOLERANCE = 1.5


#: The gap that separates cells after a run ending in a character that is not wide (Latin, digits, symbols),
#: in ems: such a run's width is an estimate (half an em each), off by up to 0.84 em over the eleven
#: trial PDFs ("security@example.com.tw" then "。"; "±0.5" then "℃" were read as two cells), while their
#: table cells stand 1.55 em apart or more.
LATIN_GAP_EMS = 1.2


def _wide_gap(prev: _Run, run: _Run) -> bool:
    """Whether the estimated gap between two runs of a line is wider than GAP_EMS x their font size
    (LATIN_GAP_EMS after a run ending in a character that is not wide)."""
    wide = unicodedata.east_asian_width(prev.text[-1:] or " ") in ("W", "F")
    return run.x - (prev.x + _width(prev.text, prev.size)) > (GAP_EMS if wide else LATIN_GAP_EMS) * max(prev.size, run.size)


def _column_starts(lines: list[list[_Run]]) -> list[float]:
    """The x where a table column starts on a page: where a run follows a wide gap (``_wide_gap``) on
    two lines or more. The gap is estimated from character counts (``_width``), so a cell of wide
    Latin letters can seem to touch the next ("Price per monthUsers included" in reportlab's default
    table); another row of the table, whose cells stand clearly apart, shows where its columns start."""
    starts = [run.x for line in lines for prev, run in zip(line, line[1:]) if _wide_gap(prev, run)]
    return sorted({round(x, 1) for x in starts
                   if sum(abs(x - other) <= COLUMN_TOLERANCE for other in starts) >= 2})


@dataclass(slots=True)
class _Cells:
    """One line of a page cut into cells at wide gaps: [start x, text, estimated end x] each, its
    baseline (of its last line once a wrapped cell's next line is merged in) and font size."""
    cells: list[list]
    y: float
    size: float

    def merge(self, below: "_Cells") -> None:
        """Appends the cells of ``below``, the next line of cells that wrapped, to the cells they continue."""
        for x, text, end in below.cells:
            cell = min(self.cells, key=lambda c: abs(c[0] - x))
            # Latin words wrap at a space; a capital then a lower-case letter is one word cut ("Wi-F" + "i")
            latin = cell[1][-1:].isascii() and cell[1][-1:].isalnum() and text[:1].isascii() and text[:1].isalnum()
            joint = " " if latin and not (cell[1][-1:].isupper() and text[:1].islower()) else ""
            cell[1] += joint + text
            cell[2] = end
        self.y = below.y


def _continues(row: _Cells, line: _Cells) -> bool:
    """Whether ``line`` holds the wrapped rest of some cells of the table row ``row`` (a cell
    too narrow for its text goes on below it in the same column): ``row`` has two cells or
    more, ``line`` fewer, set no further below than WRAP_LEADING x its size, each of its cells
    starting where one of ``row``'s does (within an em), and each cell it continues but the
    last reaching to within WRAP_EMS ems of the next cell's start, as a wrapped cell does, or
    starting exactly where a cell after the first does at a line's spacing (CELL_LINE_LEADING:
    a cell's own second line). A row with an empty cell starts further down (the cells' padding)
    or under cells that end short."""
    if len(row.cells) < 2 or not 0 < len(line.cells) < len(row.cells) or row.y - line.y > WRAP_LEADING * line.size:
        return False
    next_line = row.y - line.y <= CELL_LINE_LEADING * line.size  # a cell's own next line, not a row's padding
    for x, _, _ in line.cells:
        at = min(range(len(row.cells)), key=lambda i: abs(row.cells[i][0] - x))
        if abs(row.cells[at][0] - x) > line.size:
            return False
        aligned = next_line and at > 0 and abs(row.cells[at][0] - x) <= COLUMN_TOLERANCE
        if not aligned and at + 1 < len(row.cells) and row.cells[at][2] < row.cells[at + 1][0] - WRAP_EMS * row.size:
            return False
    return True


def _centred_above(above: _Cells, row: _Cells, columns: list[float]) -> bool:
    """Whether ``above`` is the first line of a cell of ``row`` that wrapped while the row's other cells sit
    in its middle (reportlab's default: a trial's school calendar read "高一、高二年级；高三按全市联考安" /
    "11月4日—11月6日 | 期中考试" / "排"): one cell, a line's spacing above the row (CELL_LINE_LEADING), past
    the row's last cell and starting at a column start of the page. Its rest, below, then joins as any
    wrapped cell does (``_continues``)."""
    if len(above.cells) != 1 or len(row.cells) < 2 or not 0 < above.y - row.y <= CELL_LINE_LEADING * row.size:
        return False
    x = above.cells[0][0]
    return x > row.cells[-1][2] and any(abs(x - c) <= COLUMN_TOLERANCE for c in columns)


_ENDS = "。！？!?；;：:”’」』）)】》"
#: A line that opens an article of a regulation ("第五条 学位课成绩…"): it starts a line of its own.
_ARTICLE = re.compile(r"第[一二三四五六七八九十百千零〇两0-9]+条")


def _latin_wrap(out: str, line: str) -> bool:
    """Whether an English line ending in ")" or ":" wrapped into ``line``, a line going on in Latin letters: the
    sentence goes on (a trial's "issued to Nordhavn Instruments (Shanghai)" / "Co., Ltd. with the company tax ID."
    was quoted from "Co., Ltd.")."""
    return out[-1] in "):" and out[-2:-1].isascii() and line[:1].isascii() and line[:1].isalnum()


def _join(lines: list[str]) -> str:
    """Lines of one page as text: a wrapped line continues its sentence
    (joined without a break; with a space between Latin words, none after a
    line ending in a word's hyphen), while a table row or a line ending a
    sentence keeps its line break."""
    out = ""
    for line in lines:
        if not out:
            out = line
        elif " | " in line or " | " in out.rsplit("\n", 1)[-1] or (out[-1] in _ENDS and not _latin_wrap(out, line)) \
                or _ARTICLE.match(line) or (out[-1] == "." and out[-2:-1].isalpha() and not line[0].isascii()):
            # an English sentence's end before a line in Chinese starts another paragraph (a trial's reply
            # templates read "…within 3-5 days.模板B（产品有问题）：…" as one)
            out += "\n" + line
        elif out[-1] == "-" and out[-2:-1].isalnum() and line[0].isascii() and line[0].isalnum():
            out += line  # a name wrapped at its hyphen ("pg-" / "replica-2"): one word again, hyphen kept
        elif out[-1].isascii() and line[0].isascii():
            out += " " + line
        else:
            out += line
    return out


def _wrapped_heading_lines(lines: list[_Line], headings: list[int]) -> set[int]:
    """The heading lines (indices among ``headings``, lines set larger than the body) that go on from the
    line before them: that line is a heading of the same size on the same page, and it does not end like a
    sentence or a clause. A long title wraps: "Hang On Insurance Company Limited - WorldCover" / "Travel
    Protection: English Version of Selected" / "Sections" is one heading."""
    marked = set(headings)
    return {i for i in headings if i - 1 in marked and round(lines[i - 1].size, 1) == round(lines[i].size, 1)
            and lines[i - 1].page == lines[i].page and lines[i - 1].text.rstrip()[-1:] not in _ENDS + "，,、"}


def parse_pdf(data: bytes, name: str = "") -> ParsedFile:
    """A PDF as sections under font-size headings, blocks with page numbers.

    Raises:
        FileParseError: encrypted with a password, not a readable PDF, or
            no text layer.
    """
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FileParseError("encrypted PDF: needs a password")
        pages = [_page_lines(page, number) for number, page in enumerate(reader.pages, start=1)]
        info = reader.metadata or {}
    except FileParseError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as err:
        message = str(err)
        if "decrypt" in message.lower() or "password" in message.lower():
            raise FileParseError("encrypted PDF: needs a password") from None
        raise FileParseError(f"not a readable PDF ({type(err).__name__}: {message[:200]})") from None
    lines = [line for page in pages for line in page]
    contents = table_of_contents([line.text for line in lines])  # navigation, not content
    lines = [line for i, line in enumerate(lines) if i not in contents]
    if not any(line.text.strip() for line in lines):
        raise FileParseError(f"no text layer (scanned PDF?): {len(pages)} pages without text; OCR is not supported")
    sizes = Counter()
    for line in lines:
        sizes[round(line.size, 1)] += len(line.text)
    body = sizes.most_common(1)[0][0]
    def sized_heading(ln: _Line) -> bool:
        if len(ln.text) > MAX_HEADING_CHARS:
            return False
        if ln.size >= HEADING_RATIO * body:
            return True
        return ln.size >= SUBHEADING_RATIO * body and ln.text.rstrip()[-1:] not in _ENDS + "，,、"

    # a paragraph set a little larger than the body (10.5 pt over a 10 pt table) is no sub-heading: its first
    # line goes on in a line of its size that is no heading (a trial's school calendar made each paragraph's
    # first line a heading, "…寒假自2027年1月23日起，下学期", and cut its sentence there)
    paragraph_starts = {id(ln) for ln, below in zip(lines, lines[1:])
                        if ln.size < HEADING_RATIO * body and below.page == ln.page
                        and round(below.size, 1) == round(ln.size, 1) and not sized_heading(below)}

    def is_heading(ln: _Line) -> bool:
        return sized_heading(ln) and id(ln) not in paragraph_starts

    heading_sizes = sorted({round(ln.size, 1) for ln in lines if is_heading(ln)}, reverse=True)
    level = {size: i + 1 for i, size in enumerate(heading_sizes)}
    # headings set in the body's size, under a larger title line at most: chapters and the numbered outline
    sized = [i for i, ln in enumerate(lines) if round(ln.size, 1) in level and is_heading(ln)]
    numbered = {} if len(sized) > 1 else {i: n for i, n in outline_headings([line.text for line in lines]).items()
                                           if i not in sized}
    builder = SectionBuilder()
    paragraph: list[str] = []
    page_of = 0
    wrapped = _wrapped_heading_lines(lines, [i for i in sized if i not in numbered])
    for i, line in enumerate(lines):
        if i in wrapped:
            builder.continue_heading(line.text)
            continue
        if (round(line.size, 1) in level and is_heading(line)) or i in numbered:
            builder.add(_join(paragraph), page_of)
            paragraph = []
            builder.heading(level[round(line.size, 1)] if i not in numbered else len(level) + numbered[i],
                            line.text, numbered=numbered.get(i, 0) >= READER_LEVEL_OFFSET)
            continue
        if paragraph and line.page != page_of:
            builder.add(_join(paragraph), page_of)
            paragraph = []
        if not paragraph:
            page_of = line.page
        paragraph.append(line.text)
    builder.add(_join(paragraph), page_of)
    title = _CONTROLS.sub("", str(info.get("/Title") or "")).strip()
    if title.lower() in ("(anonymous)", "anonymous", "untitled") or _FILE_NAME_TITLE.fullmatch(title):
        title = ""  # writer defaults, not titles: a browser's "Save as PDF" of an untitled page names its file
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0] if name else ""
    return ParsedFile(title or builder.first_heading or stem, builder.build(), MEDIA_TYPE, pages=len(pages),
                      metadata=author_metadata(_CONTROLS.sub("", str(info.get("/Author") or ""))))
