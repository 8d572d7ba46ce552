"""What a question names that the law pack's lookups find: articles by law
and number, and offences (罪名). Each call is counted in
``domains.law_zh.USAGE["query_lookups"]``."""
from __future__ import annotations

import re

from domains.law_zh import USAGE
from domains.law_zh import references as lr

_BIGRAM_CLEAN = re.compile(r"[^\u4e00-\u9fff]")
_OFFENCE_NAME = (
    re.compile(r"罪名[:：]\s*([^\n]+)"),
    re.compile(r"(?:构成|犯有?|以|涉嫌)([\u4e00-\u9fff、]{2,24}?)罪"),
)


def article_mentions(query: str) -> list:
    """The article references of ``query`` (references.article_mentions)."""
    USAGE["query_lookups"] += 1
    return lr.article_mentions(query)


def offence_names(query: str) -> list[str]:
    """Offences a case description names: after "罪名：" (several split by
    ";"), and in "构成X罪", "犯X罪", "以X罪", "涉嫌X罪"; in order, distinct.
    A name ending in 犯 is the first half of 犯罪 ("crime": 涉嫌跨境犯罪,
    对该盲人犯罪), not an offence, and is left out."""
    USAGE["query_lookups"] += 1
    query = lr.normalize(query)
    found: list[str] = []
    first = _OFFENCE_NAME[0].search(query)
    if first:
        found += [n.strip(" 。.,，") for n in re.split(r"[;；]", first.group(1))]
    for match in _OFFENCE_NAME[1].finditer(query):
        found.append(match.group(1))
    return [n for n in dict.fromkeys(found) if len(_BIGRAM_CLEAN.sub("", n)) >= 2 and not n.endswith("犯")]


