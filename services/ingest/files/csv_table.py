"""Tables as text (.csv, .tsv) through the standard library's csv module:
the whole file is one table block, each row a line of cells joined by
`` | `` (TABLE_CELL_SEPARATOR) under the first row, the header, as a
Markdown or .docx table is read, so chunks cut inside it repeat the header
(services.ingest.chunking). The delimiter is sniffed (comma, tab,
semicolon, vertical bar); encoding as for .txt files (``decode_text``);
title: the file name. A spare-parts list kept as .csv was skipped as an
unsupported type in a trial.
"""
from __future__ import annotations

import csv
import io

from services.common.text import TABLE_CELL_SEPARATOR
from services.ingest.files.model import FileParseError, ParsedFile, SectionBuilder
from services.ingest.files.text import decode_text

MEDIA_TYPE = "text/csv"
TSV_MEDIA_TYPE = "text/tab-separated-values"
#: Characters read to sniff the delimiter.
SNIFF_CHARS = 8192


def parse_csv(data: bytes, name: str = "") -> ParsedFile:
    """A .csv or .tsv file as one section holding one table block (module doc).

    Raises:
        FileParseError: undecodable (``decode_text``), malformed beyond what
            the csv module reads (a field over its size limit), or no cell
            holds a value.
    """
    text, encoding = decode_text(data)
    try:
        dialect = csv.Sniffer().sniff(text[:SNIFF_CHARS], delimiters=",\t;|")
    except csv.Error:  # one column, or too irregular to tell: the extension's delimiter
        dialect = csv.excel_tab if name.lower().endswith(".tsv") else csv.excel
    try:
        rows = [[" ".join(cell.split()) for cell in row] for row in csv.reader(io.StringIO(text, newline=""), dialect)]
    except csv.Error as err:
        raise FileParseError(f"not a readable table: {err}") from None
    lines = [TABLE_CELL_SEPARATOR.join(row) for row in rows if any(row)]
    if not lines:
        raise FileParseError("no cell holds a value")
    builder = SectionBuilder()
    builder.add("\n".join(lines))
    stem = name.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0] if name else ""
    media_type = TSV_MEDIA_TYPE if name.lower().endswith(".tsv") else MEDIA_TYPE
    return ParsedFile(stem, builder.build(), media_type, metadata={"encoding": encoding})
