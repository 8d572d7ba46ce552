"""The pieces a text is quoted in, and the sentences they belong to.
Chinese text is cut at its own punctuation
(services.common.text.split_sentences), while an English paragraph often
stays one line, and ". " does not always end a sentence; a Chinese sentence
cut at "；" is still one sentence (a rule and its exception). Pure; used by
the extractive answer's quotable pieces (quotable.py)."""
from __future__ import annotations

import re

from services.common.text import split_sentences

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


def text_pieces(text: str) -> list[tuple[str, int]]:
    """``text`` cut into pieces (``split_sentences``, English clauses joined,
    then ``english_sentences``), each with the number of the sentence it
    belongs to: pieces cut at a "；" that goes on on the same line share
    their sentence's number ("72小时以上取消的，全额退款；72小时以内取消的，不予
    退款。" is one sentence of two pieces); every other piece has its own.
    Numbers rise in reading order; whitespace-only pieces are left out."""
    pieces = english_clauses_joined(split_sentences(text))
    out: list[tuple[str, int]] = []
    sentence = 0
    for index, piece in enumerate(pieces):
        parts = english_sentences(piece)
        for number, part in enumerate(parts):
            out.append((part, sentence))
            sentence += number < len(parts) - 1
        goes_on = piece.rstrip(" \t").endswith("；") and index + 1 < len(pieces) and pieces[index + 1][:1] not in "\r\n"
        sentence += not goes_on
    return out
