"""Files in: one parser per format, each a pure function
``parse(data, name) -> ParsedFile`` (``model``), chosen by media type or
by the file name's extension; a PDF or a .docx is read as what it is
whatever its name says (``sniffed_type``).

| format | media type | module |
|---|---|---|
| .txt | text/plain | ``text`` (encoding detection: UTF-8 with or without BOM, UTF-16 BOM, GB18030) |
| .md, .markdown | text/markdown | ``markdown`` (markdown-it-py) |
| .html, .htm | text/html | ``html`` (selectolax) |
| .pdf | application/pdf | ``pdf`` (pypdf) |
| .docx | application/vnd.openxmlformats-officedocument.wordprocessingml.document | ``docx`` (python-docx) |
| .csv, .tsv | text/csv, text/tab-separated-values | ``csv_table`` (the csv module) |

JSONL records go through ``services.ingest.jsonl_documents`` instead.
"""
from __future__ import annotations

from collections.abc import Callable

from services.ingest.files.csv_table import MEDIA_TYPE as CSV, TSV_MEDIA_TYPE as TSV, parse_csv
from services.ingest.files.docx import MEDIA_TYPE as DOCX, parse_docx
from services.ingest.files.html import MEDIA_TYPE as HTML, parse_html
from services.ingest.files.markdown import MEDIA_TYPE as MARKDOWN, parse_markdown
from services.ingest.files.model import Block, FileParseError, ParsedFile, Section
from services.ingest.files.pdf import MEDIA_TYPE as PDF, parse_pdf
from services.ingest.files.text import MEDIA_TYPE as TEXT, parse_text

__all__ = ["Block", "FileParseError", "ParsedFile", "Section", "PARSERS", "EXTENSIONS", "TEXT", "MARKDOWN", "HTML", "PDF", "DOCX", "CSV",
           "media_type_of", "parse_file", "sniffed_type"]

PARSERS: dict[str, Callable[[bytes, str], ParsedFile]] = {
    TEXT: parse_text, MARKDOWN: parse_markdown, HTML: parse_html, PDF: parse_pdf, DOCX: parse_docx, CSV: parse_csv, TSV: parse_csv,
}
EXTENSIONS = {
    ".txt": TEXT, ".text": TEXT, ".md": MARKDOWN, ".markdown": MARKDOWN,
    ".html": HTML, ".htm": HTML, ".xhtml": HTML, ".pdf": PDF, ".docx": DOCX, ".csv": CSV, ".tsv": TSV,
}
#: Media types that are the same formats under other names.
_ALIASES = {"text/x-markdown": MARKDOWN, "application/xhtml+xml": HTML, "application/x-pdf": PDF}


def media_type_of(name: str, media_type: str = "") -> str:
    """The supported media type of a file: ``media_type`` (parameters such
    as "; charset=..." ignored) when given, else from ``name``'s extension;
    "" when not supported."""
    if media_type.strip():
        base = media_type.split(";", 1)[0].strip().lower()
        base = _ALIASES.get(base, base)
        return base if base in PARSERS else ""
    return EXTENSIONS.get(extension_of(name), "")


def extension_of(name: str) -> str:
    """The extension of ``name``'s last path part, lower case with its dot
    (".md" for "notes/a.MD"); "" when it has none: a dot in a folder's name
    ("release.v2/README") or a leading dot (".env") is not one."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    dot = base.rfind(".")
    return base[dot:].lower() if dot > 0 else ""


#: Leading bytes of the binary formats, which no text file starts with.
_PDF_MAGIC = b"%PDF-"
_ZIP_MAGIC = b"PK\x03\x04"
_TEXT_KINDS = (TEXT, MARKDOWN, HTML, CSV, TSV)


#: Bytes a PDF may carry before its header (readers accept it within the first kilobyte).
_BEFORE_PDF = b"\xef\xbb\xbf \t\r\n\x00"


def sniffed_type(kind: str, data: bytes) -> str:
    """The type ``data`` is, when its leading bytes say so against ``kind``
    (the type its name or media type gave): a PDF (its header after at most
    a byte order mark and blanks) or a zip archive named as text (.txt, .md,
    .html) is read as PDF or .docx (a trial's PDF named x.txt was stored as
    8 chunks of PDF syntax); ``kind`` otherwise. ``parse_file`` falls back
    to ``kind`` when the sniffed type cannot be read and the bytes are text."""
    if kind in _TEXT_KINDS:
        if data[:1024].lstrip(_BEFORE_PDF).startswith(_PDF_MAGIC):
            return PDF
        if data.startswith(_ZIP_MAGIC):
            return DOCX  # the .docx parser names a zip archive that holds no Word document
    return kind


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def parse_file(name: str, media_type: str, data: bytes) -> ParsedFile:
    """Parses one file, as the type its leading bytes show when they
    contradict its name (``sniffed_type``).

    Raises:
        FileParseError: unsupported type, empty file, or the parser's own
            reason (encrypted, no text layer, corrupt, undecodable), or a
            file that holds no text at all.
    """
    kind = media_type_of(name, media_type)
    if not kind:
        shown = media_type or extension_of(name) or "no extension"
        raise FileParseError(f"unsupported file type {shown!r}; supported: {', '.join(sorted(EXTENSIONS))}")
    if not data:
        raise FileParseError("empty file")
    sniffed = sniffed_type(kind, data)
    try:
        return _parse_as(sniffed, name, data)
    except FileParseError:
        if sniffed != kind and _is_utf8(data):  # a memo that merely starts with "%PDF-1.7 is the version we target"
            return _parse_as(kind, name, data)
        raise


def _parse_as(kind: str, name: str, data: bytes) -> ParsedFile:
    """``data`` parsed as ``kind``. Raises FileParseError (see parse_file)."""
    try:
        parsed = PARSERS[kind](data, name)
    except FileParseError:
        raise
    except ImportError as err:
        raise FileParseError(f"the {kind} parser is not installed ({err.name}); install graphmesh[files]") from None
    except Exception as err:  # noqa: BLE001 - a parser bug or a malformed file fails this file only
        raise FileParseError(f"cannot parse as {kind}: {type(err).__name__}: {str(err)[:200]}") from None
    if not parsed.sections:
        raise FileParseError("no text found in the file")
    return parsed
