"""Markdown files (.md) through markdown-it-py (CommonMark, with tables):
ATX and setext headings become the heading path, paragraphs, list items
(an ordered item with its number, "1. 检查油位", as the .txt reader keeps it),
block quotes and code blocks become blocks, a table becomes one block of
rows ("cell | cell"); a raw HTML block (a <table>, a <div>) is read by the
HTML reader into the same kinds of blocks, never dropped. Title: the first
level-1 heading, else the file name.
"""
from __future__ import annotations

from services.common.text import TABLE_CELL_SEPARATOR
from services.ingest.files.html import add_html_fragment
from services.ingest.files.model import ParsedFile, SectionBuilder
from services.ingest.files.text import decode_text

MEDIA_TYPE = "text/markdown"


def _inline_text(token) -> str:
    """Plain text of an inline token (emphasis, links and code kept as text)."""
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "image":
            parts.append(child.content)
    return "".join(parts)


def parse_markdown(data: bytes, name: str = "") -> ParsedFile:
    """A Markdown file as sections (module doc).

    Raises:
        FileParseError: undecodable (see ``decode_text``).
    """
    from markdown_it import MarkdownIt

    text, encoding = decode_text(data)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    builder = SectionBuilder()
    title = ""
    row: list[str] = []
    rows: list[str] = []
    heading_level = 0
    marker = ""  # an ordered list item's number, for the first line of its text
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            heading_level = int(tok.tag[1])
        elif tok.type == "inline" and heading_level:
            content = _inline_text(tok)
            if heading_level == 1 and not title:
                title = content.strip()
            builder.heading(heading_level, content)
            heading_level = 0
        elif tok.type == "inline" and tokens[i - 1].type in ("th_open", "td_open"):
            row.append(_inline_text(tok).strip())
        elif tok.type == "list_item_open" and tok.info:  # markdown-it gives an ordered item's number as its info
            marker = f"{tok.info}{tok.markup} "
        elif tok.type == "inline":
            builder.add(marker + _inline_text(tok))
            marker = ""
        elif tok.type == "tr_close":
            rows.append(TABLE_CELL_SEPARATOR.join(row))
            row = []
        elif tok.type == "table_close":
            builder.add("\n".join(rows))
            rows = []
        elif tok.type in ("fence", "code_block"):
            builder.add(tok.content)
        elif tok.type == "html_block":
            add_html_fragment(builder, tok.content)
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0] if name else ""
    return ParsedFile(title or stem, builder.build(), MEDIA_TYPE, metadata={"encoding": encoding})
