"""What a question names that the law pack's lookups find: articles by law
and number, and offences (罪名). Each call is counted in
``domains.law_zh.USAGE["query_lookups"]``."""
from __future__ import annotations

import re

from domains.law_zh import USAGE
from domains.law_zh import references as lr

_BIGRAM_CLEAN = re.compile(r"[^\u4e00-\u9fff]")
#: Words that ask rather than name: "以什么罪", "涉嫌哪种罪", "构成何罪".
_QUESTION_WORD = re.compile(r"什么|哪|何罪|何种|怎么|怎样|多少|吗")
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
    对该盲人犯罪), and a name holding a question word asks for the offence
    (以什么罪, 涉嫌哪种罪): neither is an offence, both are left out. A
    罪名 value ends at its first ，or 。 (the text after it is the case's)."""
    USAGE["query_lookups"] += 1
    query = lr.normalize(query)
    found: list[str] = []
    first = _OFFENCE_NAME[0].search(query)
    if first:
        value = re.split(r"[，,。]", first.group(1), maxsplit=1)[0]
        found += [n.strip(" 。.,，、") for n in re.split(r"[;；]", value)]
    for match in _OFFENCE_NAME[1].finditer(query):
        found.append(match.group(1))
    found = [n.strip("、") for n in found]
    return [n for n in dict.fromkeys(found)
            if len(_BIGRAM_CLEAN.sub("", n)) >= 2 and not n.endswith("犯") and not _QUESTION_WORD.search(n)]


