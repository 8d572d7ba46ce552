"""A chat follow-up's earlier turns in the query sent to Answer: how they are written before the
question (``with_earlier``, used by the OpenAI-compatible route), read back apart from it
(``split_earlier``), and the new subject of a follow-up that swaps the earlier question's subject
for another ("那孩子呢？" after "退休人员门诊报销比例多少", ``swapped_subject``). Pure."""
from __future__ import annotations

import re

from services.common.text import simplified

_ZH_OPEN, _ZH_CLOSE, _ZH_JOIN = "（上文：", "）", "；"
_EN_OPEN, _EN_CLOSE, _EN_JOIN = "(Earlier: ", ")", "; "
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
#: A follow-up that names only its new subject: (那 / 那么 / 如果是 / 要是 / 换成 / 咁) X (的) 呢, or in English
#: "what about X", "how about X", "and X", "and for X", "same for X".
_SWAP_ZH = re.compile(r"^(?:那么?|如果是|要是|换成|改成|咁)?\s*(?P<subject>[^，,。？?！!\s呢]{1,12}?)\s*(?:的)?(?:呢|嘞|咧)\s*[？?！!。.]?$")
_SWAP_EN = re.compile(r"^(?:what about|how about|and for|and|same for)\s+(?:the\s+|a\s+|an\s+)?(?P<subject>[\w' -]{1,40}?)\s*[?.!]*$",
                      re.IGNORECASE)


def with_earlier(question: str, earlier: list[str]) -> str:
    """``question`` after its ``earlier`` user turns, in the question's language:
    "（上文：turn1；turn2）question" or "(Earlier: turn1; turn2) question"."""
    if _CJK.search(question):
        return f"{_ZH_OPEN}{_ZH_JOIN.join(earlier)}{_ZH_CLOSE}{question}"
    return f"{_EN_OPEN}{_EN_JOIN.join(earlier)}{_EN_CLOSE} {question}"


def split_earlier(query: str) -> tuple[str, str]:
    """(the earlier turns, the question) of a query ``with_earlier`` wrote; ("", query) for any other query.
    The earlier part ends at the bracket that closes the opening one, so a turn's own brackets stay in it."""
    for opening, closing, other in ((_ZH_OPEN, _ZH_CLOSE, "（"), (_EN_OPEN, _EN_CLOSE, "(")):
        if not query.startswith(opening):
            continue
        depth = 1
        for at in range(len(opening), len(query)):
            depth += (query[at] == other) - (query[at] == closing)
            if depth == 0:
                return query[len(opening):at], query[at + 1:].strip()
    return "", query


def swapped_subject(question: str) -> str:
    """The new subject of a follow-up that asks the earlier question again about something else ("孩子" of
    "那孩子呢？", "kids" of "What about kids?"); "" for any other question (a follow-up that asks something new
    of the same subject, "多少钱封顶？", keeps the earlier subject)."""
    found = _SWAP_ZH.match(simplified(question).strip()) or _SWAP_EN.match(question.strip())
    return found.group("subject").strip() if found else ""
