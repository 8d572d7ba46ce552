"""English sentences inside one line of text: Chinese text is cut at its
own punctuation (services.common.text.split_sentences), while an English
paragraph often stays one line, and ". " does not always end a sentence.
Pure; used by the extractive answer's quotable pieces (quotable.py)."""
from __future__ import annotations

import re

#: A possible English sentence end inside a line: ".", "!" or "?" (closing quotes or brackets
#: after it), whitespace, then a capital, a quote or a bracket; ``english_sentences`` checks the
#: word before it.
_ENGLISH_END = re.compile(r"[.!?][\"')\]]*\s+(?=[A-Z\"'(\[])")
#: Words after which ". " does not end a sentence (lower case, without the final dot).
_ABBREVIATIONS = frozenset("e.g i.e etc vs approx fig no nr dr mr mrs ms prof inc ltd co jr sr st dept u.s".split())


def english_sentences(line: str) -> list[str]:
    """``line`` cut after each English sentence inside it ("Leave is 15 days.
    Unused days expire on March 31. See the portal." -> three), not after an
    abbreviation ("etc.", "Dr.", "e.g."), an initial ("J. Smith") or the
    number of a list item at the line's start ("1. Download"); [line] when it
    has none. Chinese text is cut by its own punctuation before
    (``split_sentences``), and ". " before a Chinese character is not an end."""
    out, start = [], 0
    for m in _ENGLISH_END.finditer(line):
        before = line[start:m.start()].rstrip("\"')]")
        word = before.rsplit(None, 1)[-1].strip("\"'(`[").lower() if before.strip() else ""
        if not word or word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()) \
                or (word.isdigit() and before.strip() == word):
            continue
        out.append(line[start:m.end()].rstrip())
        start = m.end()
    out.append(line[start:])
    return [piece for piece in out if piece.strip()]


#: A piece that goes on in lower case on the same line: the second clause of an English sentence.
_GOES_ON_IN_LOWER_CASE = re.compile(r"[ \t]+[a-z]")


def english_clauses_joined(sentences: list[str]) -> list[str]:
    """``sentences`` with a piece ending in an ASCII ";" joined to the next
    when that goes on in lower case on the same line ("Keys can be rotated;
    the old key works for 24 hours."): in English a semicolon joins two
    clauses of one sentence, while "；" and a ";" before a capital or a
    new line still end one."""
    out: list[str] = []
    for sentence in sentences:
        if out and out[-1].endswith(";") and _GOES_ON_IN_LOWER_CASE.match(sentence):
            out[-1] += sentence
        else:
            out.append(sentence)
    return out
