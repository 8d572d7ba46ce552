"""How answers over statutes name their sources, and the other names a
law's title is asked by.

- ``SOURCE_NAMES``: a law in 《》, the 中华人民共和国 prefix, or an ordinal
  reference (第N条/款/项/章/节/编); the citation verifier takes these out
  of a sentence before checking its claim words.
- ``SOURCE_NAME_WORD``: a keyword that is a law's name (刑法, 民法典,
  治安管理处罚条例).
- ``cited_articles``: the (law, article number) pairs a text names, for
  the judge's article agreement and the citation verifier; ``named_laws``:
  the laws it names.
- ``title_aliases``: a PRC law is asked by its name without the prefix.
"""
from __future__ import annotations

import re

from domains.law_zh.references import LAW_PREFIX, NUM, normalize
from services.common.numbers import chinese_to_int

SOURCE_NAMES = re.compile(rf"《[^》]{{0,40}}》|{LAW_PREFIX}|第{NUM}[条款项章节编]")
SOURCE_NAME_WORD = re.compile(r".{2,20}(?:法|法典|条例)")
#: An article reference: optional law name (《...》 or a run of CJK ending in
#: 法/法典/条例) directly before 第N条.
_CITED_ARTICLE = re.compile(rf"(?:《([^》]{{1,40}})》|([\u4e00-\u9fff]{{1,20}}?(?:法典|法|条例)))?\s*第({NUM})条")
# Words a law name picks up from the sentence before it ("依照刑法" -> 刑法).
_LEAD_WORDS = re.compile(rf"^(?:{LAW_PREFIX}|根据|依据|依照|按照|适用|违反|参照|本|该|即|是|在|为|和|与|及|、|，)+")


def _law_name(name: str) -> str:
    return _LEAD_WORDS.sub("", name or "").removeprefix(LAW_PREFIX)


def cited_articles(text: str) -> set[tuple[str, int]]:
    """(law, article number) of each article reference in ``text``
    ("《中华人民共和国专利法》第四十二条" -> ("专利法", 42), "刑法第266条" ->
    ("刑法", 266)); a reference without a law name takes the last law named
    before it, "" when none."""
    out: set[tuple[str, int]] = set()
    last = ""
    for match in _CITED_ARTICLE.finditer(normalize(text)):
        name = _law_name(match.group(1) or match.group(2) or "")
        if name:
            last = name
        raw = match.group(3)
        number = int(raw) if raw.isdigit() else chinese_to_int(raw)
        if number:
            out.add((last, number))
    return out


_BRACKETED = re.compile(r"《([^《》]{1,40})》")


def named_laws(text: str) -> set[str]:
    """Laws ``text`` names in 《》 or before an article number, without the
    中华人民共和国 prefix ("依照《日本刑法》" -> {"日本刑法"})."""
    text = normalize(text)
    names = {_law_name(m.group(1)) for m in _BRACKETED.finditer(text)}
    names |= {law for law, _ in cited_articles(text) if law}
    return {n for n in names if n}


def title_aliases(title: str) -> tuple[str, ...]:
    """A law named 中华人民共和国X is also asked by X ("中华人民共和国刑法" ->
    ("刑法",)); other titles have no alias."""
    if title.startswith(LAW_PREFIX) and len(title) > len(LAW_PREFIX) + 1:
        return (title[len(LAW_PREFIX):],)
    return ()
