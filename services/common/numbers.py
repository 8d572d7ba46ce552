"""Numbers in Chinese text: Arabic numerals and Chinese numerals (二十,
一百零四, 两千, 十五万) read as values, so "20年" and "二十年" compare equal.
Used by the citation verifier (services.common.citation_check) and the
judge's reference metrics."""
from __future__ import annotations

import re
import unicodedata

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_UNITS = {"十": 10, "百": 100, "千": 1000}
_BIG = {"万": 10_000, "亿": 100_000_000}
_CN = "零〇一二三四五六七八九十百千万亿两"
#: Arabic numbers (thousands separators and decimals allowed) or runs of
#: Chinese numerals. A lone Chinese digit is only read when a unit follows
#: (一年, 三日, 五倍, ...): alone it is usually a word (一般, 统一, 万一).
NUMBER = re.compile(rf"\d+(?:,\d{{3}})*(?:\.\d+)?|[{_CN}]{{2,}}|[{_CN}](?=[年月日天个条款项倍人元次周岁万亿])")


def chinese_to_int(text: str) -> int | None:
    """Value of a Chinese numeral ("二十" -> 20, "一百零四" -> 104, "两千" ->
    2000, "十五万" -> 150000, "二〇二三" -> 2023 read digit by digit); None
    when ``text`` is not one."""
    if not text or any(ch not in _CN for ch in text):
        return None
    if not any(ch in _UNITS or ch in _BIG for ch in text):
        return int("".join(str(_DIGITS[ch]) for ch in text))
    total, section, digit = 0, 0, None
    for ch in text:
        if ch in _DIGITS:
            digit = _DIGITS[ch]
        elif ch in _UNITS:
            section += (1 if digit is None else digit) * _UNITS[ch]
            digit = None
        else:  # 万 / 亿
            section += digit or 0
            total = (total + section) * _BIG[ch]
            section, digit = 0, None
    return total + section + (digit or 0)


def number_values(text: str) -> list[float]:
    """Values of the numbers in ``text`` (NFKC-normalised first), in order:
    Arabic and Chinese numerals alike; "1,000" is 1000."""
    out: list[float] = []
    for token in NUMBER.findall(unicodedata.normalize("NFKC", text)):
        if token[0].isdigit():
            out.append(float(token.replace(",", "")))
        else:
            value = chinese_to_int(token)
            if value is not None:
                out.append(float(value))
    return out
