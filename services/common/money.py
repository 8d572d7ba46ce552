"""Sums of money in questions and passages (Chinese and English): whether a
question asks what something costs, and whether a text states a price. Pure;
used by the fuser to rank a passage that states a price before one that does
not when the question asks one (``services.fuser.core.price_first``) and by
the extractive answer's number bonus (``services.gateway.answer.question_cues``)."""
from __future__ import annotations

import re

from services.common.text import simplified

#: A number, in digits or Chinese numerals.
NUMBER = r"(?:\d+(?:[.,]\d+)*|[零一二两三四五六七八九十百千万半]+)"
#: A number with a currency: 120元, 3.5万元, ¥80, $25, 30 dollars.
STATED = re.compile(NUMBER + r"\s*(?:元|块|万元|万|亿元|美元|英镑|欧元|角|分钱)|[¥￥$€£]\s*\d|"
                    + NUMBER + r"\s*(?:dollars?|pounds?|euros?|cents?|yuan|RMB|USD|CNY|EUR|GBP|HKD)\b|"
                    r"\b(?:RMB|USD|CNY|EUR|GBP|HKD)\s*\d", re.IGNORECASE)
#: That something costs nothing, or half: 免费, 不收费, free of charge. Answers 要钱吗 as a sum does.
_NO_CHARGE = re.compile(r"免费|不收费|不收取(?:任何)?费用|不另收费|半价|\bfree of charge\b|\bno (?:extra )?charge\b|"
                        r"\bat no (?:extra )?cost\b|\bfor free\b", re.IGNORECASE)
#: A table whose header names its prices' column ("价格（元）", "费用(元)", "Price (USD)"): its rows' bare
#: numbers are sums of money.
_PRICE_HEADER = re.compile(r"[（(]\s*(?:元|万元|人民币|RMB|CNY|USD|EUR|GBP|[¥￥$€£])\s*(?:/[^)）]{1,6})?[)）]|"
                           r"价格|价钱|收费|费用|金额|单价|\b(?:price|fee|cost)s?\b", re.IGNORECASE)
_TABLE_NUMBER = re.compile(r"\|\s*\d+(?:[.,]\d+)?(?:\s*[-–~～至]\s*\d+(?:[.,]\d+)?)?\s*(?:\||$)", re.MULTILINE)
#: Words with which a question asks what something costs: 多少钱, 收费吗, 价格是多少, how much does ... cost. Narrower
#: than the words naming money (补贴, 报销, 罚款, a bare 价格), which a question about how to claim one, or a case's
#: facts ("以100元的价格出售"), also hold.
_ASKED = re.compile(r"多少钱|几块钱|多少元|多少块|(?:价格|价钱|价位|收费标准)(?:是|大概|一般)?(?:多少|几|怎么算|如何)|"
                    r"什么价|多少价|收费(?:吗|多少)|怎么收费|收不收费|要钱|要不要钱|收钱|交钱|付钱|花钱|自费吗|收多少|贵不贵|多贵|"
                    r"费用是多少|多少费用|免费吗|"
                    r"\bhow much\b.*\b(?:cost|costs|charge|charged|pay|fee|fees|price)\b|"
                    r"\b(?:price|prices|fee|fees|cost) (?:of|for)\b|\bwhat(?:'s| is| are) the (?:price|fee|cost)s?\b",
                    re.IGNORECASE)


#: Words with which a question asks a time or a duration instead (计时收费最小按多长时间算).
_ASKS_TIME = re.compile(r"多久|多长时间|几分钟|几个?小时|几天|什么时候|\bhow long\b|\bwhen\b", re.IGNORECASE)


def asks_price(question: str) -> bool:
    """Whether ``question`` asks what something costs (``_ASKED``), and no time or duration (``_ASKS_TIME``)."""
    question = simplified(question)
    return bool(_ASKED.search(question)) and not _ASKS_TIME.search(question)


def states_price(text: str) -> bool:
    """Whether ``text`` states a sum of money: a number with a currency
    (``STATED``), that something is free (``_NO_CHARGE``), or a table row's
    bare number or range under a header naming prices ("价格（元）" over
    "| 120 |")."""
    text = simplified(text)
    return bool(STATED.search(text) or _NO_CHARGE.search(text)
                or (_PRICE_HEADER.search(text) and _TABLE_NUMBER.search(text)))
