"""Codes named in text: a model (GA-75VSD), an error code (E102), a part
number (1622-0655-00). Pure functions shared by the fuser (passages that
hold the question's codes rank first: services.fuser.core.codes_first) and
the gateway's answer rule (services.gateway.answer.named_codes). GraphMesh's
rule, not a reference design's.
"""
from __future__ import annotations

import re
import unicodedata

#: A code: letters then at least two digits, hyphens or an underscore allowed between and after
#: (GA-75VSD, E102, A-07, R134a, ISO9001); three letters or more then one digit (SEV5, IPv6); digit
#: groups joined by hyphens (1622-0655-00, 2026-10-20); an IPv4 address (10.20.4.17); a dotted name of
#: three parts or more with a letter (db.internal.example.io). Not a word with one digit and fewer
#: letters (Q1, SO2, P1), a number with a unit (11pm, 8-year-old), a version of digits (3.2.0) or a
#: hyphenated word (carry-on, Wi-Fi: held by no passage that says "hand luggage" or "wireless").
CODE = re.compile(r"(?<![A-Za-z0-9.])(?:[A-Za-z]{1,8}[-_]?\d{2,}[A-Za-z0-9]*(?:-[A-Za-z0-9]+)*|[A-Za-z]{3,8}\d(?:-[A-Za-z0-9]+)*"
                  r"|\d{3,}(?:-\d{2,})+|\d{1,3}(?:\.\d{1,3}){3}|(?=[\w.-]*[A-Za-z])[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+){2,})"
                  r"(?![A-Za-z0-9])")
_NOT_ALNUM = re.compile(r"[\W_]+", re.UNICODE)


#: A Chinese vehicle licence plate (浙A12345, 粤B·D12345): the customer's own car, named beside a question
#: ("浙A12345 做个小保养多少钱"), which no document holds; a trial's question was refused over "A12345".
_PLATE = re.compile(r"[京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼使领][A-Z][·•・ ]?[A-Z0-9]{5,6}(?![A-Za-z0-9])")


def _without_plates(text: str) -> str:
    return _PLATE.sub(" ", text)


def codes_in(text: str) -> list[str]:
    """The distinct codes of ``text`` (``CODE``, after NFKC: full-width
    letters and digits count; a licence plate is none), in order of first appearance."""
    return list(dict.fromkeys(CODE.findall(_without_plates(unicodedata.normalize("NFKC", text)))))


#: An identifier a question may name, beside codes: snake_case (max_retry_count), CamelCase with a capital
#: inside (HighLatencyP99, GraphQL, MongoDB). In a question not in Latin script also a hyphenated name
#: (refund-svc: an English question's carry-on is a word) and a word of three letters or more with a
#: capital (Kafka, JVM: a lower-case one is as likely pinyin or an everyday word, such as battery).
_SNAKE = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w-])")
_CAMEL = re.compile(r"(?<![\w-])(?:[A-Z][a-z0-9]+|[a-z]+)(?:[A-Z][A-Za-z0-9]*)+(?![\w-])")
_HYPHENATED = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+(?![\w-])")
#: A capitalised word (MongoDB, Kafka) in a question in another script, or a run of them read as one name
#: ("Too Many Requests", an error's English title: ``phrase_held``).
_CAPITALISED = re.compile(r"(?<![\w-])(?=[A-Za-z0-9]*[A-Z])[A-Za-z][A-Za-z0-9]{2,}(?: [A-Z][A-Za-z0-9]{2,})*(?![\w-])")


def names_in(text: str, latin: bool) -> list[str]:
    """The codes of ``text`` (``codes_in``) and the identifiers it names
    (``_SNAKE``, ``_CAMEL``; when ``latin`` is False, the text being a
    question in another script, also ``_HYPHENATED`` and ``_CAPITALISED``;
    a run of capitalised words counting as one name; when it is True, the capitalised words inside a sentence,
    ``_proper_names``:
    Canada, Christmas, USB), distinct, in order of first appearance: what a
    passage must hold to be about the same thing ("settlement-svc 连接池满了怎么办"
    over runbooks of ledger-svc names settlement-svc)."""
    text = _without_plates(unicodedata.normalize("NFKC", text))
    found = [(m.start(), m.group()) for rx in (CODE, _SNAKE, _CAMEL) for m in rx.finditer(text)]
    if not latin:
        found += [(m.start(), m.group()) for rx in (_HYPHENATED, _CAPITALISED) for m in rx.finditer(text)]
    else:
        found += _proper_names(text)
    if _ERROR_WORDS.search(text):  # "E4 error", "报E4": a one-letter, one-digit code (no P1 or Q1 otherwise)
        found += [(m.start(), m.group()) for m in _SHORT_CODE.finditer(text)]
    names = list(dict.fromkeys(name for _, name in sorted(found)))
    return [n for n in names if not any(n != o and n in o for o in names)]  # SEV5 inside SEV5-ack: the longer


_WORD = re.compile(r"\b[A-Z][A-Za-z]{2,}\b")
#: A code of one capital and one digit (E4), named as a code only beside a word for an error or a code.
_SHORT_CODE = re.compile(r"(?<![A-Za-z0-9.-])[A-Z]\d(?![A-Za-z0-9.])")
_ERROR_WORDS = re.compile(r"\b(?:error|err|fault|alarm|code)s?\b|错误|故障|报警|代码|报错|提示|显示", re.IGNORECASE)


def _proper_names(text: str) -> list[tuple[int, str]]:
    """(position, word) of each capitalised word of three letters or more that does not start a sentence: a
    name ("shipping to Canada?", "a Facebook group", "USB charging points"). An English trial's shipping and
    warranty questions about countries its pages do not list were answered with other countries' rows."""
    return [(m.start(), m.group()) for m in _WORD.finditer(text)
            if text[:m.start()].rstrip() and text[:m.start()].rstrip()[-1] not in ".?!:;\"'(“‘"]


def squashed(text: str) -> str:
    """Lower case, NFKC, letters and digits only: GA-37VSD, ga37vsd and
    Ｇ Ａ－３７ＶＳＤ read alike, so ``squashed(code) in squashed(text)``
    says whether ``text`` holds ``code`` in any spelling of case, width,
    hyphens and spaces ("GA37" is held by a text on GA-37VSD)."""
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text).lower())


def code_shape(code: str) -> str:
    """A code's shape: each digit 9, each letter A ("2026-10-20" -> "9999-99-99", "SEV1" -> "AAA9")."""
    return re.sub(r"[A-Za-z]", "A", re.sub(r"\d", "9", code.upper()))


def names_another_code(text: str, codes: list[str]) -> bool:
    """Whether ``text`` names a code of the same shape as one of ``codes``
    (the question's) without holding that one: the 2026-10-27 row where the
    question asks about the week of 2026-10-20, part 2906-0980-00 where it
    asks about 1622-0655-00 (a trial's rotation table quoted two other
    weeks' rows, with the names of their engineers)."""
    found = codes_in(text)
    if not found:
        return False
    held = squashed(text)
    shapes = {code_shape(f) for f in found}
    return any(squashed(code) not in held and code_shape(code) in shapes for code in codes)
