"""Word files (.docx) through python-docx: paragraphs and tables in body
order. A paragraph styled "Heading N" (or a localized "标题 N", or with an
outline level) opens a heading at level N; in a file with no such paragraph,
numbered paragraphs that run as an outline do ("一、总体要求" typed in body
style, as Chinese official documents often are; ``outline.numbered_headings``);
a table of contents typed as numbered paragraphs is left out.
"Title" gives the title; a table becomes one block of rows ("cell | cell",
merged cells once); a paragraph of a numbered or bulleted list starts with
the number Word shows for it ("1.", "（二）", "第3条"; ``docx_numbering``).
A file that is not a .docx package (corrupt or not a zip archive) fails
with that reason.
"""
from __future__ import annotations

import io
import re
import zipfile
from collections import Counter

from services.common.text import TABLE_CELL_SEPARATOR
from services.ingest.files.docx_numbering import list_numbers
from services.ingest.files.model import (FileParseError, ParsedFile, SectionBuilder, author_metadata, could_be_title,
                                         title_line)
from services.ingest.files.outline import READER_LEVEL_OFFSET, outline_headings, table_of_contents

MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_HEADING_STYLE = re.compile(r"^(?:heading|标题)\s*(\d)$", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _heading_level(paragraph, style_name: str) -> int:
    """1..9 for a heading paragraph (by its style's name, else its outline level), 0 otherwise."""
    m = _HEADING_STYLE.match(style_name.strip())
    if m:
        return int(m.group(1))
    outline = paragraph._p.find(f"{_W}pPr/{_W}outlineLvl")
    if outline is not None and outline.get(f"{_W}val", "").isdigit() and int(outline.get(f"{_W}val")) < 9:
        return int(outline.get(f"{_W}val")) + 1
    return 0


def _table_rows(table) -> list[str]:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell repeats
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            rows.append(TABLE_CELL_SEPARATOR.join(cells))
    return rows


def _look(paragraph) -> tuple[bool, int]:
    """(centred, the largest size of its runs in EMU, 0 when none is set) of a paragraph."""
    from docx.enum.text import WD_ALIGN_PARAGRAPH

    centred = paragraph.alignment == WD_ALIGN_PARAGRAPH.CENTER
    return centred, max((run.font.size or 0 for run in paragraph.runs), default=0)


def _set_out_title(blocks: list[tuple[int, str]], looks: list[tuple[bool, int]]) -> tuple[str, list[tuple[int, str]]]:
    """The title a document sets out in its first paragraph, in no Title or Heading style, and ``blocks``
    without it: the first paragraph with text when it is centred or set larger than the body (the size most
    of the text has), is not a heading and could be a title (``model.could_be_title``). ("", ``blocks``) when
    there is none. A trial's regulations, titled in a centred 22 pt line over a subtitle and a document number,
    were titled by their first chapter ("第一章 总则") or first heading."""
    first = next((i for i, (_, text) in enumerate(blocks) if text.strip()), None)
    if first is None or blocks[first][0] or not could_be_title(blocks[first][1].strip()):
        return "", blocks
    sizes = Counter()
    for (_, text), (_, size) in zip(blocks, looks):
        sizes[size] += len(text)
    body = sizes.most_common(1)[0][0]
    centred, size = looks[first]
    if not centred and not (size and body and size > body):
        return "", blocks
    return blocks[first][1].strip(), [*blocks[:first], (0, ""), *blocks[first + 1:]]


def parse_docx(data: bytes, name: str = "") -> ParsedFile:
    """A .docx as sections (module doc).

    Raises:
        FileParseError: not a .docx package.
    """
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, PackageNotFoundError, KeyError, ValueError) as err:
        reason = ("a zip archive without a Word document in it (no word/document.xml or [Content_Types].xml)"
                  if isinstance(err, (KeyError, PackageNotFoundError)) and zipfile.is_zipfile(io.BytesIO(data))
                  else "corrupt, or not a zip archive")
        raise FileParseError(f"not a valid .docx: {reason}") from None
    title = (document.core_properties.title or "").strip()
    # Style names by id, read once (python-docx's Paragraph.style searches the styles part every time).
    style_names = {s.style_id: s.name or "" for s in document.styles if s.style_id}
    blocks: list[tuple[int, str]] = []  # (styled heading level or 0, text), tables as one block of rows
    labels: list[str] = []  # each block's automatic list number ("1.", "（二）"), put before its text at the end
    numbers = list_numbers(document)
    looks: list[tuple[bool, int]] = []  # each block's (centred, largest run size in EMU)
    for element in document.element.body.iterchildren():
        if element.tag == f"{_W}p":
            paragraph = Paragraph(element, document)
            style = style_names.get(element.style or "", "")
            if style.lower() == "title":
                title = title or paragraph.text.strip()
                continue
            labels.append(numbers.label(element, element.style or "") if paragraph.text.strip() else "")
            blocks.append((_heading_level(paragraph, style), paragraph.text))
            looks.append(_look(paragraph))
        elif element.tag == f"{_W}tbl":
            labels.append("")
            looks.append((False, 0))
            blocks.append((0, "\n".join(_table_rows(Table(element, document)))))
    if not title:
        title, blocks = _set_out_title(blocks, looks)
    lines = [text if "\n" not in text else "|" for _, text in blocks]  # a table is one line of text here
    styled = {i for i, (level, _) in enumerate(blocks) if level}
    contents = table_of_contents(lines, styled or None)  # a typed table of contents: navigation, not content
    blocks = [(level, "" if i in contents else text) for i, (level, text) in enumerate(blocks)]
    lines = ["" if i in contents else line for i, line in enumerate(lines)]
    if not any(level for level, _ in blocks):  # chapters (第一章, often centred bold) and numbered headings
        found = outline_headings(lines)
        blocks = [(found.get(i, 0), text) for i, (_, text) in enumerate(blocks)]
    # the outline above is read from the typed text alone: a numbered list is not a document's outline
    blocks = [(level, f"{label} {text.strip()}" if label and text.strip() else text) for label, (level, text) in zip(labels, blocks)]
    builder = SectionBuilder()
    for level, text in blocks:
        if level:
            builder.heading(level, text, numbered=level >= READER_LEVEL_OFFSET)
        else:
            builder.add(text)
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0] if name else ""
    sections = builder.build()
    typed_title = title_line(sections)
    if typed_title and title in ("", typed_title):  # a title paragraph without the Title or a Heading style
        sections, title = sections[1:], typed_title
    return ParsedFile(title or builder.first_heading or stem, sections, MEDIA_TYPE,
                      metadata=author_metadata(document.core_properties.author or ""))
