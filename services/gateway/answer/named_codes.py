"""Codes a question names (a model GA-75VSD, an error code E102, a part
number 1622-0655-00) that no retrieved passage mentions: then the passages
found are about other items, and an answer from them would give another
machine's figures as this one's.

Why a rule and not a signal: the abstention fit reads cosines and shared
words, and a question about GA-75VSD over a GA-37VSD manual shares every
word but the code (a trial's after-sales set: answerability 0.996 for
"GA-75VSD 换油周期", answered with the GA-37VSD's interval). Pure functions,
tested directly (tests/gateway/answer/test_named_codes.py); GraphMesh's rule,
not a reference design's.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from graphmesh.common.v1 import types_pb2
from services.common.text import latin_script

#: A code: letters then at least two digits, hyphens or an underscore allowed between and after
#: (GA-75VSD, E102, A-07, R134a, ISO9001), or digit groups joined by hyphens (1622-0655-00). Not a
#: word with one digit (Q1, SO2, P1), a number with a unit (11pm, 8-year-old) or a version (3.2.0).
CODE = re.compile(r"(?<![A-Za-z0-9])(?:[A-Za-z]{1,8}[-_]?\d{2,}[A-Za-z0-9]*(?:-[A-Za-z0-9]+)*|\d{3,}(?:-\d{2,})+)"
                  r"(?![A-Za-z0-9])")
_NOT_ALNUM = re.compile(r"[\W_]+", re.UNICODE)


def _squashed(text: str) -> str:
    """Lower case, NFKC, letters and digits only: GA-37VSD, ga37vsd and Ｇ Ａ－３７ＶＳＤ read alike."""
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text).lower())


def codes_not_found(question: str, results: Sequence[types_pb2.Candidate]) -> list[str]:
    """The codes of ``question`` (``CODE``) that none of ``results`` holds
    in its text, title or headings, spelling of case, width, hyphens and
    spaces aside ("GA37" is held by a passage on GA-37VSD); [] when the
    question names none or every one is held, and when there are no results."""
    if not results:
        return []
    codes = list(dict.fromkeys(CODE.findall(unicodedata.normalize("NFKC", question))))
    if not codes:
        return []
    held = " ".join(_squashed(" ".join([c.title, *c.heading_path, c.text])) for c in results)
    return [code for code in codes if _squashed(code) not in held]


def not_found_reason(question: str, results: Sequence[types_pb2.Candidate]) -> str | None:
    """Why the answer abstains, in the question's language, when it names a
    code no result mentions (``codes_not_found``); None otherwise."""
    missing = codes_not_found(question, results)
    if not missing:
        return None
    if latin_script(question):
        return "None of the passages found mentions " + ", ".join(f'"{code}"' for code in missing)
    return "找到的资料中没有提到" + "、".join(f"“{code}”" for code in missing)
