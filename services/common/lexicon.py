"""The user dictionary: domain terms (law names, headings, entity names)
that jieba must keep whole, so that a query for 三级医院 does not match
text that only has 二三级 (MarxSphere, the MarxSphere design (docs/references.md) section 5: 分词 +
停用词过滤 before expansion).

One file, one term a line (jieba's user-dictionary format; a frequency
after the term is ignored), read from the path in ``GRAPHMESH_USER_DICT``.
Every process that tokenises (the gateway when chunking documents and as
the expander's fallback, the expander for query keywords) loads the same
file at start, and the dictionary's digest is part of each document's
content hash, so changing the dictionary re-tokenises every document on its
next ingest instead of leaving postings and queries cut differently.

Built by ``graphmesh lexicon build`` from a corpus and an entity library.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Callable, Iterable


ENV_PATH = "GRAPHMESH_USER_DICT"
#: Terms outside this length (characters) are not dictionary material.
MIN_TERM_CHARS, MAX_TERM_CHARS = 2, 16
#: Frequency given to dictionary terms: high enough that jieba prefers the
#: whole term over its parts.
TERM_FREQ = 200_000

_HAN = re.compile(r"[\u4e00-\u9fff]")
#: The ordinal of a Chinese heading (第七章, 第三节, 第二编, 第十条, 第一款,
#: 第一百二十条之一): the numbering of any Chinese document's parts.
HEADING_ORDINAL = re.compile(r"^第[零〇一二两三四五六七八九十百千0-9]+[编章节条款](?:之[零〇一二两三四五六七八九十0-9]+)?\s*")


def strip_heading_ordinal(heading: str) -> str:
    """``heading`` without its leading ordinal ("第七章 农民专业合作社联合社"
    -> "农民专业合作社联合社"; "第五十六条" -> "")."""
    return HEADING_ORDINAL.sub("", heading).strip()


def _no_aliases(title: str) -> Iterable[str]:
    return ()


def candidate_terms(titles: Iterable[str] = (), headings: Iterable[str] = (), entity_names: Iterable[str] = (),
                    title_aliases: Callable[[str], Iterable[str]] = _no_aliases) -> list[str]:
    """Dictionary terms from document titles, headings and entity names:
    each title and its aliases (``title_aliases``, from the domain packs:
    law_zh gives 公司法 for 中华人民共和国公司法); headings without their
    ordinal (第七章 农民专业合作社联合社 -> 农民专业合作社联合社);
    entity names as they are. Only terms of 2-16 characters with Chinese in
    them and no whitespace; sorted, deduplicated."""
    terms: set[str] = set()

    def add(term: str) -> None:
        term = term.strip()
        if MIN_TERM_CHARS <= len(term) <= MAX_TERM_CHARS and _HAN.search(term) and not any(c.isspace() for c in term):
            terms.add(term)

    for title in titles:
        add(title)
        for alias in title_aliases(title):
            add(alias)
    for heading in headings:
        add(strip_heading_ordinal(heading))
    for name in entity_names:
        add(name)
    return sorted(terms)


def write_dictionary(terms: Iterable[str], path: Path) -> int:
    """Writes ``terms`` (one a line, sorted) to ``path``; returns the count."""
    ordered = sorted(set(terms))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{t} {TERM_FREQ}\n" for t in ordered), encoding="utf-8")
    return len(ordered)


def read_dictionary(path: Path) -> list[str]:
    """Terms of a dictionary file (first field of each non-blank line).

    Raises:
        OSError: the file cannot be read.
    """
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if fields:
            out.append(fields[0])
    return out


def digest(terms: Iterable[str]) -> str:
    """Short SHA-256 of the sorted term set ("" for no terms)."""
    ordered = sorted(set(terms))
    return hashlib.sha256("\n".join(ordered).encode("utf-8")).hexdigest()[:16] if ordered else ""
