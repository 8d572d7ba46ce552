"""Whether a chat question is a follow-up that needs the user turns before it
(services.gateway.api.openai_compat.requests.question_of writes them before it with
services.gateway.answer.earlier_turns.with_earlier). Pure."""
from __future__ import annotations

import re

from services.common.text import simplified
from services.gateway.answer import small_talk
from services.gateway.answer.earlier_turns import with_earlier

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
#: A question that leans on the turns before it: it opens with 那 / 还有 / 另外 / 如果是 (Cantonese 咁), ends in 呢,
#: points back (它, 这个, 那些, 刚才; Cantonese 佢, 嗰个, 又点), or in English opens with and / what about / how about
#: or points back (it, that, they). Traditional characters read as simplified (還有, 這個).
_FOLLOW_UP = re.compile(r"^\s*(?:那|还有|另外|如果是|要是|同样|咁)|呢\s*[？?！!。.]?\s*$|它|这个|那个|这些|那些|上面|刚才|"
                        r"佢|嗰|𠮶|又点|又系|"  # OpenCC writes 嗰 as 𠮶
                        r"^\s*(?:and|but|what about|how about|what if|same for)\b|\b(?:it|that|this|they|them|those|these)\b",
                        re.IGNORECASE)
#: A question this short names nothing of its own ("多少钱？", "How much?"): letters (CJK characters, or Latin words).
FOLLOW_UP_MAX_CHARS, FOLLOW_UP_MAX_WORDS = 4, 3


def leans_on_earlier(question: str) -> bool:
    """Whether ``question`` is a follow-up that needs the user turns before it (``_FOLLOW_UP``, or at most
    FOLLOW_UP_MAX_CHARS CJK characters / FOLLOW_UP_MAX_WORDS words): "那孩子呢？", "多少钱？". A question that
    stands alone is sent alone: a trial's "周末开门吗" after two questions about vaccine prices was answered
    with the prices. A greeting or thanks alone ("谢谢") is none: sent with the turns before it, it was answered
    as the earlier question again."""
    if small_talk.reason(question):
        return False
    if _FOLLOW_UP.search(simplified(question)):
        return True
    if _CJK.search(question):
        return len(_CJK.findall(question)) <= FOLLOW_UP_MAX_CHARS
    return len(re.findall(r"[A-Za-z0-9]+", question)) <= FOLLOW_UP_MAX_WORDS



def within(question: str, earlier: list[str], max_chars: int, min_earlier_chars: int) -> str:
    """``question`` after its ``earlier`` turns (``with_earlier``) in at most ``max_chars``: the earliest turns
    dropped, and the last one kept cut while at least ``min_earlier_chars`` of it fit; the question alone when
    none fits."""
    while earlier:
        query = with_earlier(question, earlier)
        spare = max_chars - len(query)
        if spare >= 0:
            return query
        if len(earlier) == 1 and len(earlier[0]) + spare >= min_earlier_chars:
            return with_earlier(question, [earlier[0][: len(earlier[0]) + spare]])
        earlier = earlier[1:]
    return question
