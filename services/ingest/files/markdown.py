"""Markdown files (.md) through markdown-it-py (CommonMark, with tables):
ATX and setext headings become the heading path, paragraphs, list items
(an ordered item with its number, "1. 检查油位", as the .txt reader keeps it),
block quotes and code blocks become blocks, a table becomes one block of
rows ("cell | cell"); a raw HTML block (a <table>, a <div>) is read by the
HTML reader into the same kinds of blocks, never dropped. A YAML front matter
block (``---`` lines at the top, as Jekyll, Hugo and wikis write it) is read
as the document's metadata, not as text: its keys that a filter can name,
with their scalar values (a list's items joined by ", "); its ``title`` names
the document when no level-1 heading does. Title: the first level-1 heading,
else the front matter's title, else the file name.
"""
from __future__ import annotations

import datetime

from services.common.filters import MAX_VALUE_CHARS, metadata_key_problem
from services.common.records import storable_text
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
    from mdit_py_plugins.front_matter import front_matter_plugin

    text, encoding = decode_text(data)
    tokens = MarkdownIt("commonmark").enable("table").use(front_matter_plugin).parse(text)
    front: dict[str, str] = {}
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
        elif tok.type == "front_matter":
            front = front_matter(tok.content)
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0] if name else ""
    named = front.pop("title", "") if "\n" not in front.get("title", "") else ""
    return ParsedFile(title or named or stem, builder.build(), MEDIA_TYPE, metadata={**front, "encoding": encoding})


_SCALARS = (str, int, float, bool, datetime.date)


def front_matter(source: str) -> dict[str, str]:
    """The metadata a YAML front matter gives (``yaml.safe_load``): each key a
    filter can name (``filters.metadata_key_problem``) with a scalar value, or
    a list of scalars joined by ", ", as text of at most MAX_VALUE_CHARS
    characters; other keys (nested maps, bad names) are left out, and a block
    that is not YAML mapping gives {}. A trial's runbook front matter (team,
    owner) was stored as the document's first chunk, and its heading read
    "team: sre owner: 黄晨"."""
    import yaml

    try:
        loaded = yaml.safe_load(source)
    except yaml.YAMLError:
        return {}
    if not isinstance(loaded, dict):
        return {}
    found = {}
    for key, value in loaded.items():
        if isinstance(value, list) and all(isinstance(v, _SCALARS) for v in value):
            value = ", ".join(map(str, value))
        if not isinstance(key, str) or metadata_key_problem(key) or not isinstance(value, _SCALARS):
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if text and len(text) <= MAX_VALUE_CHARS and storable_text(text):
            found[key] = text
    return found
