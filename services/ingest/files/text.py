"""Plain text files (.txt): encoding detection and paragraphs.

Encoding: a BOM decides (UTF-8, UTF-16); otherwise strict UTF-8; otherwise
charset-normalizer's best guess, where any guess of the GB family (GB2312,
GBK, HZ) decodes as GB18030, their superset; a file nothing decodes is a
failure. Paragraphs are separated by blank lines; a line such as
"第一章 总则" (第…编 / 章 / 节) opens a heading (编 outermost), and so do
numbered section lines ("4. 配额引擎", "13.2 可选服务与自动降级") when their
numbers run as a document's outline does (``numbered_headings``).
"""
from __future__ import annotations

import codecs
import re

from services.common.numbers import chinese_to_int
from services.ingest.files.model import FileParseError, ParsedFile, SectionBuilder

MEDIA_TYPE = "text/plain"
_GB_FAMILY = ("gb2312", "gbk", "gb18030", "hz")
_CHAPTER = re.compile(r"^\s*第[一二三四五六七八九十百千零〇两0-9]+([编章节])(?:\s+\S.{0,40})?\s*$")
_LEVEL = {"编": 1, "章": 2, "节": 3}
#: Section numbers that open a heading line, by style: "一、标题" (Chinese numeral), "（一）标题",
#: "4. 标题" / "4、标题" / "13.2 标题" (Arabic, dotted for depth).
_NUMBER_STYLES = (
    ("chinese", re.compile(r"^([一二三四五六七八九十]{1,3})、\s*(\S.*)$")),
    ("chinese_paren", re.compile(r"^[（(]([一二三四五六七八九十]{1,3})[)）]\s*(\S.*)$")),
    ("arabic", re.compile(r"^(\d{1,3}(?:\.\d{1,3}){0,3})(?:[.、]\s*|\s+)(\S.*)$")),
)
#: A numbered line this long, or ending like a sentence or a lead-in, is a list item, not a heading.
_HEADING_MAX_CHARS = 60
_NOT_A_HEADING_END = tuple("。；;，,：:！!？?=")
#: Levels of numbered headings start below the 编 / 章 / 节 chapters'.
_FIRST_NUMBERED_LEVEL = 4
#: Fewer numbered headings than this in a file is no outline (one "1." line is a list of one).
_MIN_NUMBERED_HEADINGS = 2


def decode_text(data: bytes) -> tuple[str, str]:
    """(text, encoding name) of ``data``; see the module doc.

    Raises:
        FileParseError: no encoding decodes it, or it holds NUL bytes after
            decoding (a binary file).
    """
    if data.startswith(codecs.BOM_UTF8):
        text, encoding = data[len(codecs.BOM_UTF8):].decode("utf-8", errors="replace"), "utf-8-sig"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text, encoding = data.decode("utf-16"), "utf-16"
    else:
        try:
            text, encoding = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = _guess(data)
    if "\x00" in text:
        raise FileParseError("binary file, not text (NUL characters)")
    return text, encoding


def _guess(data: bytes) -> tuple[str, str]:
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    name = (best.encoding if best is not None else "").lower().replace("_", "")
    if best is None or any(name.startswith(g) for g in _GB_FAMILY):
        try:
            return data.decode("gb18030"), "gb18030"
        except UnicodeDecodeError:
            if best is None:
                raise FileParseError("cannot detect the text encoding (not UTF-8, UTF-16 or GB18030)") from None
    return str(best), best.encoding


def _number_of(line: str) -> tuple[str, tuple[int, ...]] | None:
    """(numbering style, section number) of a line that could be a numbered heading."""
    if line[:1].isspace() or len(line.strip()) > _HEADING_MAX_CHARS:
        return None
    for style, pattern in _NUMBER_STYLES:
        m = pattern.match(line.rstrip())
        if not m or m.group(2).endswith(_NOT_A_HEADING_END) or "→" in m.group(2):
            continue
        if style != "arabic":
            value = chinese_to_int(m.group(1))
            return (style, (value,)) if value else None
        if "." not in m.group(1) and line[len(m.group(1)):len(m.group(1)) + 1] not in ".、":
            return None  # "32 输出项" is a number in prose; a one-level heading is "32." or "32、"
        return style, tuple(int(n) for n in m.group(1).split("."))
    return None


def _follows(number: tuple[int, ...], outline: tuple[int, ...]) -> bool:
    """Whether ``number`` is the next section after ``outline`` at some
    depth: the next sibling of an open level (4 after 3.2, 3.3 after 3.2) or
    the first child of the deepest (3.2.1 after 3.2)."""
    depth = len(number)
    if depth > len(outline) + 1 or number[:depth - 1] != outline[:depth - 1]:
        return False
    expected = outline[depth - 1] + 1 if depth <= len(outline) else 1
    return number[-1] == expected


def numbered_headings(lines: list[str]) -> dict[int, int]:
    """{line index: heading level} of the lines of a plain-text file that
    are numbered section headings.

    A candidate is an unindented line of at most 60 characters that starts
    with a section number ("一、", "（一）", "4." / "4、" / "4.2") and does
    not end like a sentence or a lead-in. It is a heading when its number
    follows its style's outline so far (1, 2, 2.1, 2.2, 3, ...; ``_follows``)
    and the next non-blank line is not its numbered sibling (two sibling
    lines in a row are a list). Numbered lists inside sections restart at 1
    or are indented, so they do not follow the outline. Styles nest in the
    order the file first uses them (一、 then （一） then 1., as Chinese
    official documents number), a deeper style restarting under each new
    heading of a shallower one; within a style, depth is the number of dotted
    parts. A file with fewer than two such headings has none."""
    found: dict[int, int] = {}
    styles: list[str] = []  # in nesting order
    outline: dict[str, tuple[int, ...]] = {}
    candidates = {i: parsed for i, line in enumerate(lines) if (parsed := _number_of(line))}
    for i, (style, number) in candidates.items():
        if not _follows(number, outline.get(style, ())):
            continue
        following = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
        sibling = candidates.get(following) if following is not None else None
        if sibling and sibling[0] == style and len(sibling[1]) == len(number) and _follows(sibling[1], number):
            continue
        if style not in styles:
            styles.append(style)
        rank = styles.index(style)
        for deeper in styles[rank + 1:]:
            outline.pop(deeper, None)
        outline[style] = number
        found[i] = _FIRST_NUMBERED_LEVEL + 4 * rank + len(number) - 1
    return found if len(found) >= _MIN_NUMBERED_HEADINGS else {}


def parse_text(data: bytes, name: str = "") -> ParsedFile:
    """A .txt file as paragraphs under chapter headings; title = the file
    name without its extension.

    Raises:
        FileParseError: undecodable or binary.
    """
    text, encoding = decode_text(data)
    all_lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    numbered = numbered_headings(all_lines)
    builder = SectionBuilder()
    lines: list[str] = []
    for i, line in enumerate(all_lines):
        chapter = _CHAPTER.match(line)
        if chapter or i in numbered:
            builder.add("\n".join(lines))
            lines = []
            builder.heading(_LEVEL[chapter.group(1)] if chapter else numbered[i], line)
        elif line.strip():
            lines.append(line.strip())
        else:  # a blank line ends a paragraph
            builder.add("\n".join(lines))
            lines = []
    builder.add("\n".join(lines))
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0] if name else ""
    return ParsedFile(stem or builder.first_heading, builder.build(), MEDIA_TYPE, metadata={"encoding": encoding})
