"""Token counting and sentence splitting for chunking (MetaSearch: 512
tokens with 64 overlap, the MetaSearch design (docs/references.md)).

How tokens are counted (``count_tokens``): every CJK character (Han
ideographs, kana, hangul) is one token; every run of other letters and
digits (a Latin word, a number) is one token; every other non-space
character (punctuation, operators, box drawing, arrows) is one token;
whitespace is not counted. This tracks what a subword embedder such as
multilingual-e5 sees without loading its tokenizer, and errs high: a chunk
of 256 counted tokens was at most 371 e5 tokens on the documents dev set,
and no law article of at most 512 exceeds e5's 512 positions. Counting
words alone let a chunk of ASCII-art diagram or code hold 2,000 characters
(791 e5 tokens) whose tail the embedder never saw.

Sentences (``split_sentences``) end after 。！？；!?; (a run of them), an
ellipsis (…… / ...), a Latin full stop followed by whitespace, or a line
break; closing quotes and brackets right after the end (”’」』）)】》"')
stay with their sentence, so 他说：“走吧。”然后 is cut after ”.
"""
from __future__ import annotations

import re

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0003134f"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+|[^\w\s]")
_END = re.compile(r"(?:[。！？!?；;]+|…+|\.{3,}|\.(?=\s)|\n)[”’」』）)\]】》〉\"']*")


#: A list item's number or letter before its full stop, at the start of a line ("8", "12", "b").
_MARKER = re.compile(r"\s*(?:\d{1,3}|[A-Za-z])")


def count_tokens(text: str) -> int:
    """Tokens of ``text`` (module doc)."""
    return len(_TOKEN.findall(text))


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, each with its terminator and closing quotes
    (not after a list item's number: "8. 解锁恢复" is one); concatenated they
    give ``text`` back."""
    out, start = [], 0
    for m in _END.finditer(text):
        if m.group() == "." and _MARKER.fullmatch(text, start, m.start()):
            continue  # "8." numbers the step after it: a chunk cut there left "8." alone at its end
        out.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return [s for s in out if s]


def cut_tokens(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` tokens each, at token
    boundaries (for a sentence longer than a chunk)."""
    pieces, start, count = [], 0, 0
    for m in _TOKEN.finditer(text):
        if count == limit:
            pieces.append(text[start : m.start()])
            start, count = m.start(), 0
        count += 1
    pieces.append(text[start:])
    return [p for p in pieces if p]


def pack(sentences: list[str], target: int, overlap: int) -> list[tuple[int, int]]:
    """Groups consecutive sentences into chunks of at most ``target`` tokens
    (a single longer sentence must have been cut first); each chunk after
    the first starts with the trailing sentences of the previous one that
    fit in ``overlap`` tokens. Returns (first, end) sentence index ranges."""
    sizes = [count_tokens(s) for s in sentences]
    ranges: list[tuple[int, int]] = []
    start = 0
    while start < len(sentences):
        end, size = start, 0
        while end < len(sentences) and (end == start or size + sizes[end] <= target):
            size += sizes[end]
            end += 1
        ranges.append((start, end))
        if end >= len(sentences):
            break
        back, carried = end, 0
        while back - 1 > start and carried + sizes[back - 1] <= overlap:
            back -= 1
            carried += sizes[back]
        start = back
    return ranges
