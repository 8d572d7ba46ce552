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
from collections.abc import Sequence

from graphmesh.common.v1 import types_pb2
from services.common.codes import names_in, squashed
from services.common.text import latin_script
from services.gateway.answer.earlier_turns import split_earlier


def codes_not_found(question: str, results: Sequence[types_pb2.Candidate]) -> list[str]:
    """The codes and identifiers of ``question`` (``services.common.codes.names_in``: GA-75VSD,
    settlement-svc, max_retry_count, MongoDB in a Chinese question) that none of ``results`` holds
    in its text, title or headings, spelling of case, width, hyphens and
    spaces aside ("GA37" is held by a passage on GA-37VSD), a run of capitalised words held by any of its
    words (a trial's "429 Too Many Requests 怎么处理" was refused over "Too" and "Many"); [] when the
    question names none or every one is held, and when there are no results."""
    if not results:
        return []
    earlier, asked = split_earlier(question)  # a chat's "(Earlier: …)" wrapper is not the user's ("Earlier" was refused)
    question = f"{earlier} {asked}".strip()
    codes = names_in(question, latin_script(question))
    if not codes:
        return []
    texts = [" ".join([c.title, *c.heading_path, c.text]) for c in results]
    held = " ".join(squashed(t) for t in texts)
    return [code for code in codes if not any(squashed(word) in held or _singular(squashed(word)) in held
                                              for word in ([code, *code.split()] if " " in code else [code]))
            and not _spelt_out(code, texts)]


#: An acronym of two to six capitals (ODR, LSR, VTR), and the words a spelt-out name may hold whose
#: initials it skips (Bill of Lading: BL or BOL).
_ACRONYM = re.compile(r"[A-Z]{2,6}s?")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_SKIPPABLE = {"of", "and", "the", "to", "for", "in", "on", "a", "an", "&"}


def _spelt_out(code: str, texts: Sequence[str]) -> bool:
    """Whether ``code``, an acronym (``_ACRONYM``), is held spelt out in one of ``texts``: consecutive
    capitalised words whose initials make it, small lower-case words between them skipped ("Order Defect
    Rate" for ODR, "Bill of Lading" for BL; a trial's "ODR 多少会封号" was refused with the answer first,
    while "odr" in lower case was answered). Capitals are required so that initials do not line up by chance."""
    if not _ACRONYM.fullmatch(code):
        return False
    target = code[:-1] if code.endswith("s") else code
    for text in texts:
        words = _WORD.findall(text)
        for start in range(len(words)):
            matched, at = 0, start
            while at < len(words) and matched < len(target):
                word = words[at]
                small = word.lower() in _SKIPPABLE
                if word[0] == target[matched] or (small and matched and word[0] == target[matched].lower()):
                    matched += 1  # a small word may give its letter too (Bill of Lading: BOL)
                elif not small or matched == 0:
                    break
                at += 1
            if matched == len(target):
                return True
    return False


def _singular(word: str) -> str:
    """An English plural's singular, near enough ("sundays" -> "sunday"); the word itself otherwise."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and word.isascii() and word.isalpha() else word


def not_found_reason(question: str, results: Sequence[types_pb2.Candidate]) -> str | None:
    """Why the answer abstains, in the question's language, when it names a
    code no result mentions (``codes_not_found``); None otherwise."""
    missing = codes_not_found(question, results)
    if not missing:
        return None
    if latin_script(question):
        return "None of the passages found mentions " + ", ".join(f'"{code}"' for code in missing)
    return "找到的资料中没有提到" + "、".join(f"“{code}”" for code in missing)
