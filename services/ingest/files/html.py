"""HTML files (.html, .htm) through selectolax (Lexbor HTML5 parser).

Navigation and non-content elements are dropped before reading: script,
style, noscript, template, nav, header, footer, aside, form, button, svg,
iframe and anything with role="navigation" / "banner" / "contentinfo".
h1..h6 become the heading path; block elements (p, li, div, blockquote,
pre, dd, ...) end a block; a table becomes one block of rows
("cell | cell"); a code listing's line-number gutter (a first cell that a
syntax highlighter marks as such, reading 1 2 3 ... beside the code) is
dropped. Title: <title>, else the first h1, else the file name.
"""
from __future__ import annotations

import re

from services.common.text import TABLE_CELL_SEPARATOR
from services.ingest.files.model import GUTTER_MIN_LINES, ParsedFile, SectionBuilder
from services.ingest.files.text import decode_text

MEDIA_TYPE = "text/html"
_DROP = ("script, style, noscript, template, nav, header, footer, aside, form, button, svg, iframe, "
         "[role=navigation], [role=banner], [role=contentinfo]")
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_GUTTER_CLASS = re.compile(r"gutter|linenos|\blntd\b|line-?numbers")
_BLOCKS = frozenset("p div li ul ol dl dt dd blockquote pre section article main figure figcaption caption address "
                    "br hr details summary".split())


class _Reader:
    def __init__(self, builder: SectionBuilder | None = None) -> None:
        self.builder = builder or SectionBuilder()
        self.buffer: list[str] = []

    def flush(self) -> None:
        self.builder.add("".join(self.buffer))
        self.buffer = []

    def walk(self, node) -> None:
        for child in node.iter(include_text=True):
            tag = child.tag
            if tag == "-text":
                self.buffer.append(child.text(deep=False))
            elif tag in _HEADINGS:
                self.flush()
                self.builder.heading(_HEADINGS[tag], child.text(separator=" "))
            elif tag == "table":
                self.flush()
                self.builder.add("\n".join(_rows(child)))
            elif tag in _BLOCKS:
                self.flush()
                self.walk(child)
                self.flush()
            elif tag not in ("-comment",):
                self.walk(child)


def _rows(table) -> list[str]:
    rows = []
    for tr in table.css("tr"):
        nodes = [c for c in tr.iter() if c.tag in ("td", "th")]
        cells = [" ".join(c.text(separator=" ").split()) for c in nodes]
        if len(cells) == 2 and _is_gutter(nodes[0], cells[0]):
            cells = cells[1:]
        if any(cells):
            rows.append(TABLE_CELL_SEPARATOR.join(cells))
    return rows


def _is_gutter(node, text: str) -> bool:
    """Whether a table cell is a code listing's line numbers: a cell that a
    syntax highlighter marks as its gutter (Hexo ``gutter``, Pygments
    ``linenos``, Hugo ``lntd``, Rouge ``rouge-gutter``) and reads 1 2 ... n.
    A plain cell of numbers (floors, ranks) is content."""
    classes = (node.attributes.get("class") or "").lower()
    if not _GUTTER_CLASS.search(classes):
        return False
    numbers = text.split()
    return len(numbers) >= GUTTER_MIN_LINES and numbers == [str(n) for n in range(1, len(numbers) + 1)]


def add_html_fragment(builder: SectionBuilder, html: str) -> None:
    """Reads an HTML fragment (a Markdown file's raw HTML block: a <table>,
    a <div>) into ``builder`` as the same blocks and headings a whole HTML
    file would give; non-content elements are dropped."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(f"<html><body>{html}</body></html>")
    for node in tree.css(_DROP):
        node.decompose()
    reader = _Reader(builder)
    if tree.body is not None:
        reader.walk(tree.body)
        reader.flush()


def parse_html(data: bytes, name: str = "") -> ParsedFile:
    """An HTML file as sections (module doc).

    Raises:
        FileParseError: undecodable (see ``decode_text``).
    """
    from selectolax.lexbor import LexborHTMLParser

    text, encoding = decode_text(data)
    tree = LexborHTMLParser(text)
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node is not None else ""
    for node in tree.css(_DROP):
        node.decompose()
    reader = _Reader()
    if tree.body is not None:
        reader.walk(tree.body)
        reader.flush()
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0] if name else ""
    return ParsedFile(title or reader.builder.first_heading or stem, reader.builder.build(), MEDIA_TYPE,
                      metadata={"encoding": encoding})
