"""Plain text files (.txt): encoding detection and paragraphs.

Encoding: a BOM decides (UTF-8, UTF-16); otherwise strict UTF-8, or UTF-8 with
a fault (cut inside its last character, or a few bad bytes among many valid
characters: ``_damaged_utf8``); otherwise charset-normalizer's best guess, where any guess of the GB family (GB2312,
GBK, HZ) decodes as GB18030, their superset, and a guess of another
single-byte Latin code page gives way to Windows-1252 when that reads as
cleanly; a file nothing decodes is a failure. Paragraphs are separated by
blank lines; a line such as "第一章 总则" (第…编 / 章 / 节) opens a heading
(编 outermost), and so do numbered section lines ("一、总体要求", "4. 配额引擎", "13.2 可选服务与自动降级")
when their numbers run as a document's outline does (``outline.numbered_headings``);
a table of contents typed into the text is left out (``outline.table_of_contents``).
"""
from __future__ import annotations

import codecs

from services.ingest.files.model import FileParseError, ParsedFile, SectionBuilder, title_line
from services.ingest.files.outline import outline_headings, table_of_contents

MEDIA_TYPE = "text/plain"
_GB_FAMILY = ("gb2312", "gbk", "gb18030", "hz")
#: charset-normalizer's names of single-byte code pages for Latin letters (cp1250, iso8859_2, mac_roman, latin_1...).
_SINGLE_BYTE_LATIN = ("cp125", "cp8", "iso8859", "mac", "latin")


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
        except UnicodeDecodeError as err:
            text, encoding = _damaged_utf8(data, err) or _guess(data)
    if "\x00" in text:
        raise FileParseError("binary file, not text (NUL characters)")
    return text, encoding


#: Valid non-ASCII UTF-8 characters a file must hold per undecodable byte sequence to be read as damaged
#: UTF-8 rather than guessed: a GB18030 or Windows-1252 file decoded as UTF-8 forms few valid sequences
#: among many errors; a UTF-8 file with a stray byte forms hundreds.
DAMAGED_UTF8_RATIO = 4


def _damaged_utf8(data: bytes, err: UnicodeDecodeError) -> tuple[str, str] | None:
    """``data`` as UTF-8 when it is UTF-8 with a fault: cut inside its last
    character (that character dropped), or a few undecodable bytes among
    many valid multi-byte characters (each replaced by U+FFFD, at least
    DAMAGED_UTF8_RATIO valid ones per fault); None otherwise, for the guess."""
    if err.reason == "unexpected end of data" and err.start >= len(data) - 3:
        try:
            return data[:err.start].decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            pass
    text = data.decode("utf-8", errors="replace")
    faults = text.count("\ufffd")
    valid = sum(1 for ch in text if ord(ch) > 0x7F and ch != "\ufffd")
    return (text, "utf-8") if faults and valid >= max(DAMAGED_UTF8_RATIO * faults, 8) else None


def _guess(data: bytes) -> tuple[str, str]:
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    name = (best.encoding if best is not None else "").lower().replace("_", "")
    # UTF-16 or UTF-32 without a BOM is a guess charset-normalizer makes for short GBK text (a trial's one-line
    # 早餐加一个煎蛋收5元。 was stored as Hangul, "utf_16_be"); without a NUL byte (a UTF-16 file's line ends and
    # ASCII hold them) GB18030 is tried first then too
    if best is None or any(name.startswith(g) for g in _GB_FAMILY) \
            or (name.startswith(("utf16", "utf32")) and b"\x00" not in data):
        try:
            return data.decode("gb18030"), "gb18030"
        except UnicodeDecodeError:
            if best is None:
                raise FileParseError("cannot detect the text encoding (not UTF-8, UTF-16 or GB18030)") from None
    if name.startswith(_SINGLE_BYTE_LATIN) and name != "cp1252":
        western = _as_cp1252(data, str(best))
        if western is not None:
            return western, "cp1252"
    return str(best), best.encoding


def _as_cp1252(data: bytes, guessed: str) -> str | None:
    """``data`` decoded as Windows-1252 when that reads at least as cleanly as
    the ``guessed`` decoding of another single-byte code page
    (charset-normalizer's mess ratio), else None. Short Western text fits
    several code pages equally ("crème" is "crčme" in cp1250, both letters),
    and charset-normalizer then picks any; Windows-1252 is the one such a
    file is nearly always in (the WHATWG Encoding Standard reads latin-1
    labels as windows-1252)."""
    from charset_normalizer.md import mess_ratio

    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        return None
    return text if mess_ratio(text) <= mess_ratio(guessed) else None


def parse_text(data: bytes, name: str = "") -> ParsedFile:
    """A .txt file as paragraphs under chapter headings; title = its first
    line when that line alone stands before the first heading
    (``model.title_line``), else the file name without its extension.

    Raises:
        FileParseError: undecodable or binary.
    """
    text, encoding = decode_text(data)
    all_lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for i in table_of_contents(all_lines):  # navigation, not content
        all_lines[i] = ""
    headings = outline_headings(all_lines)
    builder = SectionBuilder()
    lines: list[str] = []
    for i, line in enumerate(all_lines):
        if i in headings or not line.strip():  # a heading or a blank line ends a paragraph
            if lines:
                builder.add("\n".join(lines))
                lines = []
            if i in headings:
                builder.heading(headings[i], line)
        else:
            lines.append(line.strip())
    builder.add("\n".join(lines))
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0] if name else ""
    sections = builder.build()
    typed_title = title_line(sections)
    if typed_title:
        sections = sections[1:]
    return ParsedFile(typed_title or stem or builder.first_heading, sections, MEDIA_TYPE, metadata={"encoding": encoding})
