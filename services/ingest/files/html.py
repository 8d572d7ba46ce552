"""HTML files (.html, .htm) through selectolax (Lexbor HTML5 parser).

Navigation and non-content elements are dropped before reading: script,
style, noscript, template, nav, header, footer, aside, form, button, svg,
iframe and anything with role="navigation" / "banner" / "contentinfo".
h1..h6 become the heading path; block elements (p, li, div, blockquote,
pre, dd, ...) end a block; a table becomes one block of rows
("cell | cell"); a code listing's line-number gutter (a first cell that a
syntax highlighter marks as such, reading 1 2 3 ... beside the code) is
dropped, and so are a breadcrumb (by its class, or a line opening 当前位置：) and a line of
publishing facts with a view count (浏览次数：12873). Title: <title>, or the first heading when
the <title> is that heading joined to the site's names (指南_办事服务_市公安局), else the first
heading, else the file name.
"""
from __future__ import annotations

import re

from services.common.text import TABLE_CELL_SEPARATOR
from services.ingest.files.model import GUTTER_MIN_LINES, ParsedFile, SectionBuilder
from services.ingest.files.text import decode_text

MEDIA_TYPE = "text/html"
_DROP = ("script, style, noscript, template, nav, header, footer, aside, form, button, svg, iframe, "
         "[role=navigation], [role=banner], [role=contentinfo], [class*=breadcrumb], [id*=breadcrumb], "
         "[aria-label=breadcrumb]")
#: A page's chrome written as text: the breadcrumb trail (当前位置：首页 > …) and the line of its publishing facts
#: with a view count (发布时间：… 浏览次数：12873). A trial's government page made a chunk of each.
_CHROME_LINE = re.compile(r"^\s*(?:当前位置|您的位置|您现在的位置|您当前的位置|现在位置)\s*[:：]"
                          r"|(?=.*(?:发布时间|发布日期|更新时间|来源|作者)\s*[:：])"
                          r".*(?:浏览次数|阅读次数|点击次数|浏览量|阅读量|点击量|访问量|访问次数)\s*[:：]\s*\d")
#: What a <title> joins the page's own title to the section's and site's names with (指南_办事服务_市公安局).
_TITLE_SEPARATORS = re.compile(r"\s*[_|｜—–]\s*|\s+-\s+")
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_GUTTER_CLASS = re.compile(r"gutter|linenos|\blntd\b|line-?numbers")
_BLOCKS = frozenset("p div li ul ol dl dt dd blockquote pre section article main figure figcaption caption address "
                    "br hr details summary".split())


class _Reader:
    def __init__(self, builder: SectionBuilder | None = None) -> None:
        self.builder = builder or SectionBuilder()
        self.buffer: list[str] = []

    def flush(self) -> None:
        text = "".join(self.buffer)
        if not _CHROME_LINE.search(text):
            self.builder.add(text)
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
    return ParsedFile(_page_title(title, reader.builder.first_heading) or stem, reader.builder.build(), MEDIA_TYPE,
                      metadata={"encoding": encoding})


def _page_title(title: str, first_heading: str) -> str:
    """The page's title: its <title>, or its first heading when the <title> is that heading joined to the
    section's and the site's names ("杭州市居住证申领办事指南_办事服务_杭州市公安局" under its h1 "杭州市居住证申领办事指南":
    every citation label carried the site); the first heading without a <title>."""
    heading = " ".join(first_heading.split())
    if title and heading and heading != title and heading in _TITLE_SEPARATORS.split(title):
        return heading
    return title or heading
