"""Word's automatic list numbers (.docx), which python-docx leaves out of a
paragraph's text: a paragraph in a numbered list (its own ``w:numPr`` or its
style's) shows "1.", "（二）" or "第3条" only on screen, while its text holds
the item alone, so "第三步是什么" found nothing to match and an answer quoted
the step without its number.

The label is rebuilt the way Word draws it (ECMA-376 Part 1, 17.9
"Numbering"): the list's level definition (``w:lvl``) gives the format of
each level's counter (``w:numFmt``: decimal, chineseCounting, lowerLetter,
bullet, ...) and the label's pattern (``w:lvlText``, "%1." or "第%1条", where
%N is level N's counter); counters are kept per abstract list, start at the
level's ``w:start`` and restart each deeper level when a level above counts
on. Overrides of a start value per list instance (``w:lvlOverride``) are
read; a pattern a level does not define gives no label.
"""
from __future__ import annotations

import re
from typing import Any

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_DIGITS = "零一二三四五六七八九"
_STEMS = "甲乙丙丁戊己庚辛壬癸"
#: What a bullet level shows: a list item mark the extractive answer and the chunker read as one.
BULLET = "•"


def _chinese(n: int) -> str:
    """1..99 in Chinese numerals (十一, 二十); larger numbers as digits."""
    if n < 10:
        return _DIGITS[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return ("" if tens == 1 else _DIGITS[tens]) + "十" + (_DIGITS[ones] if ones else "")
    return str(n)


def _roman(n: int) -> str:
    out = ""
    for value, mark in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"),
                        (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while n >= value:
            out, n = out + mark, n - value
    return out


def _letters(n: int) -> str:
    """1 -> a, 26 -> z, 27 -> aa (Word repeats the letter)."""
    return chr(ord("a") + (n - 1) % 26) * ((n - 1) // 26 + 1)


def format_counter(n: int, fmt: str) -> str:
    """Counter ``n`` in Word's number format ``fmt`` (w:numFmt's value);
    decimal for a format not known here."""
    if fmt in ("chineseCounting", "chineseCountingThousand", "chineseLegalSimplified", "ideographDigital"):
        return _chinese(n)
    if fmt in ("ideographTraditional",):
        return _STEMS[(n - 1) % 10]
    if fmt in ("lowerLetter", "upperLetter"):
        return _letters(n) if fmt == "lowerLetter" else _letters(n).upper()
    if fmt in ("lowerRoman", "upperRoman"):
        return _roman(n) if fmt == "lowerRoman" else _roman(n).upper()
    if fmt == "decimalZero":
        return f"{n:02d}"
    if fmt == "decimalFullWidth":
        return "".join(chr(ord(c) + 0xFEE0) for c in str(n))
    return str(n)


def _val(element: Any, path: str, default: str = "") -> str:
    found = element.find(path) if element is not None else None
    return found.get(f"{_W}val", default) if found is not None else default


class ListNumbers:
    """The labels of one document's numbered paragraphs, in reading order:
    ``label`` is called once per paragraph, in body order."""

    def __init__(self, numbering: Any, style_numbering: dict[str, tuple[str, int]]) -> None:
        """``numbering``: the numbering part's root element (w:numbering), or None;
        ``style_numbering``: style id -> (numId, ilvl) of styles that number their paragraphs."""
        self._abstract: dict[str, Any] = {}
        self._instances: dict[str, tuple[str, dict[int, int]]] = {}  # numId -> (abstractNumId, start overrides)
        self._style_numbering = style_numbering
        self._counters: dict[str, dict[int, int]] = {}
        if numbering is None:
            return
        for abstract in numbering.iterfind(f"{_W}abstractNum"):
            self._abstract[abstract.get(f"{_W}abstractNumId", "")] = abstract
        for num in numbering.iterfind(f"{_W}num"):
            starts = {int(o.get(f"{_W}ilvl", "0")): int(_val(o, f"{_W}startOverride", "1"))
                      for o in num.iterfind(f"{_W}lvlOverride") if o.find(f"{_W}startOverride") is not None}
            self._instances[num.get(f"{_W}numId", "")] = (_val(num, f"{_W}abstractNumId"), starts)

    def _levels(self, abstract_id: str) -> dict[int, Any]:
        abstract = self._abstract.get(abstract_id)
        return {int(lvl.get(f"{_W}ilvl", "0")): lvl for lvl in abstract.iterfind(f"{_W}lvl")} if abstract is not None else {}

    def label(self, paragraph: Any, style_id: str) -> str:
        """The label Word shows before ``paragraph`` (a w:p element; ``style_id`` its style), counting it:
        "1.", "（二）", "第3条", BULLET for a bulleted one; "" for a paragraph in no list."""
        num_pr = paragraph.find(f"{_W}pPr/{_W}numPr")
        num_id, level = _val(num_pr, f"{_W}numId"), int(_val(num_pr, f"{_W}ilvl", "0") or 0)
        if not num_id and style_id in self._style_numbering:
            num_id, level = self._style_numbering[style_id][0], level or self._style_numbering[style_id][1]
        if not num_id or num_id == "0" or num_id not in self._instances:
            return ""
        abstract_id, overrides = self._instances[num_id]
        levels = self._levels(abstract_id)
        definition = levels.get(level)
        if definition is None:
            return ""
        fmt = _val(definition, f"{_W}numFmt", "decimal")
        if fmt == "bullet":
            return BULLET
        if fmt == "none":
            return ""
        counters = self._counters.setdefault(abstract_id, {})
        start = overrides.get(level, int(_val(definition, f"{_W}start", "1") or 1))
        counters[level] = counters[level] + 1 if level in counters else start
        for deeper in [k for k in counters if k > level]:  # a level counting on restarts those below it
            del counters[deeper]
        pattern = _val(definition, f"{_W}lvlText")

        def counter(match: re.Match) -> str:
            at = int(match.group(1)) - 1
            above = levels.get(at)
            value = counters.get(at, int(_val(above, f"{_W}start", "1") or 1) if above is not None else 1)
            return format_counter(value, _val(above, f"{_W}numFmt", "decimal") if above is not None else "decimal")

        return re.sub(r"%(\d)", counter, pattern).strip()


def list_numbers(document: Any) -> ListNumbers:
    """The ``ListNumbers`` of a python-docx Document (its numbering part and its styles' own numbering)."""
    try:
        numbering = document.part.numbering_part.element
    except (KeyError, NotImplementedError, AttributeError):
        numbering = None
    styles: dict[str, tuple[str, int]] = {}
    for style in document.styles.element.iterfind(f"{_W}style"):
        num_pr = style.find(f"{_W}pPr/{_W}numPr")
        if num_pr is not None and _val(num_pr, f"{_W}numId"):
            styles[style.get(f"{_W}styleId", "")] = (_val(num_pr, f"{_W}numId"), int(_val(num_pr, f"{_W}ilvl", "0") or 0))
    return ListNumbers(numbering, styles)
