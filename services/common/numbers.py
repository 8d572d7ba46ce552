"""Numbers in Chinese text: Arabic numerals and Chinese numerals (二十,
一百零四, 两千, 十五万) read as values, so "20年" and "二十年" compare equal.
Used by the citation verifier (services.common.citation_check) and the
judge's reference metrics."""
from __future__ import annotations

import re
import unicodedata

from services.common.text import simplified

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_UNITS = {"十": 10, "百": 100, "千": 1000}
_BIG = {"万": 10_000, "亿": 100_000_000}
_CN = "零〇一二三四五六七八九十百千万亿两"
#: Arabic numbers (thousands separators and decimals allowed) or runs of
#: Chinese numerals. A lone Chinese digit is only read when a unit follows
#: (一年, 三日, 五倍, ...): alone it is usually a word (一般, 统一, 万一).
NUMBER = re.compile(rf"\d+(?:,\d{{3}})*(?:\.\d+)?|[{_CN}]{{2,}}|[{_CN}](?=[年月日天个条款项倍人元次周岁晚万亿])")


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


def int_to_chinese(number: int) -> str:
    """``number`` (0 to 9,999) in Chinese numerals as statutes write article numbers: 10 -> 十, 15 -> 十五,
    105 -> 一百零五, 110 -> 一百一十, 1010 -> 一千零一十; the inverse of ``chinese_to_int`` there.

    Raises:
        ValueError: ``number`` is outside 0 to 9,999.
    """
    if not 0 <= number <= 9999:
        raise ValueError(f"{number} is outside 0 to 9,999")
    digits = "零一二三四五六七八九"
    if number == 0:
        return digits[0]
    out, zero = [], False
    for value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        digit = number // value % 10
        if digit == 0:
            zero = bool(out)  # a gap after a written digit reads 零 before the next one
            continue
        if zero:
            out.append("零")
            zero = False
        out.append(("" if unit == "十" and not out and digit == 1 else digits[digit]) + unit)
    return "".join(out)


def number_values(text: str) -> list[float]:
    """Values of the numbers in ``text`` (NFKC-normalised first), in order:
    Arabic and Chinese numerals alike; "1,000" is 1000, and "20万" is
    200000 as "二十万" is (``quantities``' values)."""
    return [value for value, _ in quantities(text)]


#: Units of measure a number may carry, as written -> as compared (天 and 日, 月 and 个月 alike).
_MEASURE = {"个小时": "小时", "小时": "小时", "分钟": "分钟", "个月": "月", "月": "月", "天": "天", "日": "天",
            "周": "周", "星期": "周", "个星期": "周", "周岁": "岁", "年": "年", "秒": "秒", "元": "元", "块": "元", "岁": "岁", "倍": "倍",
            "%": "%", "个百分点": "%", "公斤": "kg", "千克": "kg", "公里": "km", "千米": "km", "亩": "亩", "平方米": "m2",
            "平米": "m2", "公顷": "公顷", "m2": "m2", "kg": "kg", "km": "km", "晚": "晚"}
#: English units after a number, as ``_MEASURE`` compares them ("6 years" as 6年, "32kg" as 32公斤; ㎡ and m²
#: are m2 once NFKC-normalised).
_ENGLISH_UNIT = {"year": "年", "years": "年", "yr": "年", "yrs": "年", "month": "月", "months": "月", "week": "周",
                 "weeks": "周", "day": "天", "days": "天", "hour": "小时", "hours": "小时", "hr": "小时", "hrs": "小时",
                 "minute": "分钟", "minutes": "分钟", "min": "分钟", "mins": "分钟", "kg": "kg", "kgs": "kg",
                 "kilo": "kg", "kilos": "kg", "kilogram": "kg", "kilograms": "kg", "kilogramme": "kg", "kilogrammes": "kg",
                 "km": "km", "kilometre": "km", "kilometres": "km", "kilometer": "km", "kilometers": "km",
                 "m2": "m2", "sqm": "m2", "sq m": "m2", "square metres": "m2", "square meters": "m2", "square metre": "m2",
                 "square meter": "m2", "hectare": "公顷", "hectares": "公顷",
                 "years old": "岁", "year old": "岁", "year-old": "岁", "years-old": "岁", "yrs old": "岁",
                 "night": "晚", "nights": "晚"}
#: A unit is a whole word, though CJK text may follow it directly ("30m2以上").
_WORD_END = r"(?![A-Za-z0-9])"
#: The English units as one alternation, longest first ("years old" before "years"), a capturing group.
_EN_UNIT = "(" + "|".join(sorted(map(re.escape, _ENGLISH_UNIT), key=len, reverse=True)) + ")"
_ENGLISH_UNIT_AFTER = re.compile(r"(?:[ \t]*|-)" + _EN_UNIT + _WORD_END, re.IGNORECASE)
_MEASURE_AFTER = re.compile(r"\s*(" + "|".join(sorted(map(re.escape, _MEASURE), key=len, reverse=True)) + ")")
_SCALE_AFTER = re.compile(r"\s*([万亿])")


def quantities(text: str) -> list[tuple[float, str]]:
    """Each number of ``text`` (as ``number_values`` reads it) with what it
    measures: the unit right after it (``_MEASURE``, compared alike: 13天
    and 十三日 are (13.0, "天"); 20万元 is (200000.0, "元"); English units
    as the Chinese ones: "13 days" is (13.0, "天"), "32kg" and 32公斤
    (32.0, "kg")), "clock" for a
    part of a time of day or a ratio written with a colon (13:30), "" for a
    bare number."""
    text = simplified(unicodedata.normalize("NFKC", text))
    out: list[tuple[float, str]] = []
    consumed = 0
    for match in NUMBER.finditer(text):
        if match.start() < consumed:  # the 万 of "20万" read with the number before it
            continue
        token = match.group()
        value = float(token.replace(",", "")) if token[0].isdigit() else chinese_to_int(token)
        if value is None:
            continue
        end = match.end()
        if token[0].isdigit() and (scale := _SCALE_AFTER.match(text, end)):
            value *= _BIG[scale.group(1)]
            end = scale.end()
        consumed = end
        if text[end:end + 1] == ":" and text[end + 1:end + 2].isdigit() or \
                match.start() > 0 and text[match.start() - 1] == ":" and text[match.start() - 2:match.start() - 1].isdigit():
            out.append((float(value), "clock"))
            continue
        unit = _MEASURE_AFTER.match(text, end)
        english = None if unit else _ENGLISH_UNIT_AFTER.match(text, end)
        if unit or english:
            consumed = (unit or english).end()  # the 2 of "m2" is part of the unit, not a number
        out.append((float(value), _MEASURE[unit.group(1)] if unit else _ENGLISH_UNIT[english.group(1).lower()] if english else ""))
    return out


_RANGE_NUM = rf"(\d+(?:\.\d+)?|[{_CN}]+)"
_RANGE_UNIT = "(" + "|".join(sorted(map(re.escape, _MEASURE), key=len, reverse=True)) + ")"
_DASH = r"(?:至|到|-|~|–|—|－|～)"
#: (pattern, kind): "between" reads (low, its unit or None, high, unit); "from" (low, unit) an open
#: upper end; "upto" (high, unit) an open lower end.
_RANGES = (
    (re.compile(rf"{_RANGE_NUM}\s*{_RANGE_UNIT}\s*(?:及以上|以上)\s*{_RANGE_NUM}\s*{_RANGE_UNIT}\s*(?:以下|以内)"), "between"),
    (re.compile(rf"满\s*{_RANGE_NUM}\s*{_RANGE_UNIT}\s*[但且而]?\s*(?:不满|不足|未满|不到)\s*{_RANGE_NUM}\s*{_RANGE_UNIT}"), "half_open"),
    (re.compile(rf"{_RANGE_NUM}\s*{_RANGE_UNIT}?\s*(?:及以上|以上)\s*{_DASH}\s*{_RANGE_NUM}\s*{_RANGE_UNIT}"), "between"),
    (re.compile(rf"{_RANGE_NUM}\s*{_RANGE_UNIT}?\s*{_DASH}\s*{_RANGE_NUM}\s*{_RANGE_UNIT}"), "between"),
    (re.compile(rf"{_RANGE_NUM}\s*{_RANGE_UNIT}\s*(?:及以上|或以上|以上|以后|之后|起)"), "from"),
    (re.compile(rf"(?:已满|满|超过|大于|高于)\s*{_RANGE_NUM}\s*{_RANGE_UNIT}"), "from"),
    (re.compile(rf"{_RANGE_NUM}\s*{_RANGE_UNIT}\s*(?:以下|以内|之内|内)"), "upto"),
    (re.compile(rf"(?:不满|不足|未满|不到|少于|低于|小于)\s*{_RANGE_NUM}\s*{_RANGE_UNIT}"), "upto"),
    (re.compile(rf"\b(\d+(?:\.\d+)?)\s*{_EN_UNIT}?\s*(?:-|–|to)\s*(\d+(?:\.\d+)?)\s*{_EN_UNIT}{_WORD_END}", re.IGNORECASE), "between"),
    (re.compile(rf"\b(\d+(?:\.\d+)?)\+?\s*{_EN_UNIT}\s*(?:or more|and (?:above|over|up)|or longer)\b", re.IGNORECASE), "from"),
    (re.compile(rf"\b(?:under|less than|fewer than|up to|within)\s*(\d+(?:\.\d+)?)\s*{_EN_UNIT}{_WORD_END}", re.IGNORECASE), "upto"),
    (re.compile(rf"\b(?:over|more than|at least)\s*(\d+(?:\.\d+)?)\s*{_EN_UNIT}{_WORD_END}", re.IGNORECASE), "from"),
)


def _value(token: str) -> float | None:
    if token[0].isdigit():
        return float(token)
    value = chinese_to_int(token)
    return None if value is None else float(value)


def _unit(token: str | None) -> str:
    if not token:
        return ""
    return _MEASURE.get(token) or _ENGLISH_UNIT.get(token.lower(), "")


#: A range's lower bound in the unit of its upper one, when they differ ("满6个月不满1年": 0.5 to 1 year).
_IN_LARGER_UNIT = {("月", "年"): 1 / 12, ("天", "周"): 1 / 7, ("小时", "天"): 1 / 24, ("分钟", "小时"): 1 / 60}
#: How far below its upper bound a "满…不满…" range ends: it holds its lower bound and not its upper one.
HALF_OPEN_EPSILON = 1e-6


def ranges(text: str) -> list[tuple[float, float, str]]:
    """The ranges of a quantity ``text`` states, as (low, high, unit) with
    the unit compared as ``quantities`` compares it (天 and 日 alike; English
    years, months, weeks, days, hours, kilograms and kilometres as 年, 月,
    周, 天, 小时, kg, km): "1年至5年" and "1-5 years" are (1, 5, "年"),
    "10 to 25 kg" (10, 25, "kg"), "25 kg and over" (25, inf, "kg"),
    "10亩以上至30亩" (10, 30, "亩"), "90-144平方米" (90, 144, "m2"), "满5年不满10年" (5, 10, "年"),
    "10年及以上" (10, inf, "年"), "14岁以下" and "under 14 years" (-inf, 14,
    ...), "三年以上十年以下" (3, 10, "年"). A range read whole is not read
    again in its parts; one written with two units is read in the larger when
    they convert (满6个月不满1年: 0.5 to 1 year), else left out;
    boundaries count as inside, but for the upper one of "满…不满…" (满1年不满2年
    ends HALF_OPEN_EPSILON below 2: a seniority table's 满1年 is the next
    row's). Traditional characters read as simplified (滿5年未滿10年)."""
    text = simplified(unicodedata.normalize("NFKC", text))
    out: list[tuple[float, float, str]] = []
    taken: list[tuple[int, int]] = []  # a range read whole is not read again in parts ("满5年不满10年": not "满10年")
    for pattern, kind in _RANGES:
        for match in pattern.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            taken.append(match.span())
            groups = match.groups()
            if kind in ("between", "half_open"):
                low, low_unit, high, unit = (groups[0], groups[1], groups[2], groups[3])
                low_value, high_value, unit = _value(low), _value(high), _unit(unit)
                if low_value is not None and low_unit and _unit(low_unit) != unit:  # 满6个月不满1年: in years
                    factor = _IN_LARGER_UNIT.get((_unit(low_unit), unit))
                    low_value = None if factor is None else low_value * factor
                if low_value is None or high_value is None or not unit:
                    continue
                # "满1年不满2年" holds 1 year and not 2: the next row ("满2年不满3年") starts there
                top = max(low_value, high_value) - (HALF_OPEN_EPSILON if kind == "half_open" else 0.0)
                out.append((min(low_value, high_value), top, unit))
                continue
            value, unit = _value(groups[0]), _unit(groups[1])
            if value is None or not unit:
                continue
            out.append((value, float("inf"), unit) if kind == "from" else (float("-inf"), value, unit))
    return out
