"""Long queries: keywords by content weight, and the part that is embedded.

A pasted case description can run to 10,000 characters; an embedding model
sees a window (multilingual-e5-small: 512 tokens, about 680 Chinese
characters). Two things are taken from such a query:

- ``weighted_keywords``: content terms of the whole text, at most ``limit``,
  the heaviest by TF-IDF weight: (1 + ln tf) x idf, tf = occurrences in the
  query (sublinear, SMART "l", so a term repeated throughout a narrative does
  not crowd out a specific term said once or twice, e.g. at the end), idf =
  jieba's bundled general-Chinese table (``jieba/analyse/idf.txt``; a term
  missing there gets the table's median). Queries with at most ``limit``
  keywords keep them all, as ``text.query_keywords`` gives them. On the facts
  dev set (BM25, bench/embedder_study.py --keyword-study) the first 64
  keywords give R@10 0.099, the 64 heaviest 0.251, all 0.269.
- ``cut_for_embedding``: the sentences richest in content words, greedily, by
  the weight of the terms a sentence adds that the kept sentences do not yet
  cover, per character, until the model's window is full; they are embedded
  in their original order. The cut reports its method and the kept spans.
  ``method="head"`` keeps the opening instead (the naive cut, for comparison).
"""
from __future__ import annotations

import bisect
import heapq
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from services.common.text import STOP_WORDS, document_terms, query_keywords, split_sentences

METHOD_WHOLE = "whole"
METHOD_CONTENT = "content_sentences"
METHOD_HEAD = "head"

_CLAUSE_END = re.compile(r"(?<=[，,：:])")
_DIGITS = re.compile(r"^[\d.]+$")
_PUNCT_OR_SPACE = re.compile(r"^[\W_]+$", re.UNICODE)


@dataclass(slots=True)
class QueryCut:
    """What was embedded of a query.

    Attributes:
        text: the embedded text.
        original_chars: characters of the query.
        embedded_chars: characters of ``text``.
        method: METHOD_WHOLE (nothing cut), METHOD_CONTENT or METHOD_HEAD.
        spans: [start, end) character offsets into the query of the kept
            pieces, ascending; one span covering everything when whole.
    """

    text: str
    original_chars: int
    embedded_chars: int
    method: str
    spans: list[tuple[int, int]] = field(default_factory=list)


@lru_cache(maxsize=1)
def _idf_table() -> tuple[dict[str, float], float]:
    from jieba.analyse import default_tfidf

    freq = default_tfidf.idf_loader.idf_freq
    return freq, default_tfidf.idf_loader.median_idf


def _is_content(term: str) -> bool:
    return len(term) > 1 and term not in STOP_WORDS and not _DIGITS.match(term)


def term_weights(text: str) -> dict[str, float]:
    """TF-IDF weight of each content term of ``text`` (jieba search-mode
    tokens, lower-cased; stop words, single characters and numbers left out):
    (1 + ln occurrences) times jieba's IDF (median IDF when unknown)."""
    counts: dict[str, int] = {}
    for term in document_terms(text):
        if _is_content(term):
            counts[term] = counts.get(term, 0) + 1
    return _tfidf(counts)


def _tfidf(counts: dict[str, int]) -> dict[str, float]:
    idf, median = _idf_table()
    return {t: (1.0 + math.log(n)) * idf.get(t, median) for t, n in counts.items()}


def weighted_keywords(text: str, limit: int) -> tuple[list[str], int]:
    """The query's keywords (``text.query_keywords``, first-seen order) when
    there are at most ``limit``; else the ``limit`` heaviest by TF-IDF
    (``term_weights``; a keyword that is not a content term, such as a single
    character, weighs 0), heaviest first, ties in first-seen order.

    Returns:
        (keywords, number of distinct keywords found before the cut).

    Raises:
        ValueError: ``limit`` < 1.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    keywords = query_keywords(text)
    if len(keywords) <= limit:
        return keywords, len(keywords)
    weights = term_weights(text)
    ranked = sorted(range(len(keywords)), key=lambda i: (-weights.get(keywords[i], 0.0), i))
    return [keywords[i] for i in ranked[:limit]], len(keywords)


def _pieces(text: str, max_piece: int) -> list[tuple[int, int]]:
    """[start, end) spans of the sentences of ``text``; a sentence longer
    than ``max_piece`` is split after its commas/colons, and a clause still
    longer is sliced."""
    spans: list[tuple[int, int]] = []
    start = 0
    for sentence in split_sentences(text):
        end = start + len(sentence)
        if len(sentence) <= max_piece:
            spans.append((start, end))
        else:
            pos = start
            for clause in _CLAUSE_END.split(sentence):
                while clause:
                    part = clause[:max_piece]
                    spans.append((pos, pos + len(part)))
                    pos += len(part)
                    clause = clause[len(part):]
        start = end
    return [(a, b) for a, b in spans if text[a:b].strip()]


@dataclass(frozen=True, slots=True)
class Window:
    """An embedding model's query window.

    Attributes:
        capacity: room for the pieces, in the units of ``sizes``.
        sizes: sizes of several pieces (tokens or characters); a joined text
            may differ a little from the sum, so ``fits`` has the last word.
        fits: whether one whole candidate text fits the window.
    """

    capacity: int
    sizes: Callable[[list[str]], list[int]]
    fits: Callable[[str], bool]


def char_window(chars: int) -> Window:
    """A window of ``chars`` characters (models without a token window)."""
    return Window(chars, lambda texts: [len(t) for t in texts], lambda text: len(text) <= chars)


def cut_for_embedding(text: str, window: Window, *, method: str = METHOD_CONTENT) -> QueryCut:
    """The part of ``text`` to embed within ``window``.

    - whole text when it fits;
    - METHOD_HEAD: the opening pieces (sentences; long ones split at commas)
      that fit;
    - METHOD_CONTENT: pieces chosen greedily by the TF-IDF weight of the
      content terms they add (terms already covered add nothing) per square
      root of their length (so a long piece is not crowded out by fragments),
      while their sizes fit the capacity; joined in text order. One jieba
      pass over the text (with offsets) gives every piece its terms.
    If the joined pieces still do not fit, the last chosen are dropped; a
    first piece that does not fit alone is sliced to fit.

    Raises:
        ValueError: unknown method.
    """
    if method not in (METHOD_CONTENT, METHOD_HEAD):
        raise ValueError(f"unknown cut method {method!r}")
    if window.fits(text):
        return QueryCut(text, len(text), len(text), METHOD_WHOLE, [(0, len(text))])
    pieces = _pieces(text, max_piece=200)
    sizes = window.sizes([text[a:b] for a, b in pieces]) if pieces else []
    if method == METHOD_HEAD:
        chosen = _head(sizes, window.capacity)
    else:
        chosen = _by_content(text, pieces, sizes, window.capacity)
    while chosen and not window.fits(_join(text, pieces, chosen)):
        chosen.pop()
    spans = [pieces[i] for i in sorted(chosen)]
    if not spans:  # not even one piece fits: the longest fitting opening
        spans = [_longest_fitting_prefix(text, pieces[0] if pieces else (0, len(text)), window.fits)]
    kept = "".join(text[a:b] for a, b in spans)
    return QueryCut(kept, len(text), len(kept), method, _merge(spans))


def _join(text: str, pieces: list[tuple[int, int]], chosen: list[int]) -> str:
    return "".join(text[pieces[i][0]:pieces[i][1]] for i in sorted(chosen))


def _piece_terms(text: str, pieces: list[tuple[int, int]]) -> tuple[list[set[str]], dict[str, float]]:
    """Content terms of each piece and TF-IDF weights of the whole text's
    terms, from one jieba search-mode pass with offsets."""
    import jieba

    starts = [a for a, _ in pieces]
    terms: list[set[str]] = [set() for _ in pieces]
    counts: dict[str, int] = {}
    for word, a, _b in jieba.tokenize(text, mode="search"):
        term = word.lower()
        if not _is_content(term) or _PUNCT_OR_SPACE.match(term):
            continue
        counts[term] = counts.get(term, 0) + 1
        k = bisect.bisect_right(starts, a) - 1
        if k >= 0 and a < pieces[k][1]:
            terms[k].add(term)
    return terms, _tfidf(counts)


def _head(sizes: list[int], capacity: int) -> list[int]:
    chosen: list[int] = []
    used = 0
    for i, size in enumerate(sizes):
        if used + size > capacity:
            break
        chosen.append(i)
        used += size
    return chosen


def _by_content(text: str, pieces: list[tuple[int, int]], sizes: list[int], capacity: int) -> list[int]:
    """Indexes of the pieces taken, in the order taken: best first by the
    weight of the new terms a piece adds per square root of its length,
    while the sizes fit ``capacity``. Lazy greedy: a gain only falls as
    coverage grows, so a stale heap entry is re-scored at the top."""
    piece_terms, weights = _piece_terms(text, pieces)
    covered: set[str] = set()
    chosen: list[int] = []
    used = 0

    def gain(i: int) -> float:
        a, b = pieces[i]
        return sum(weights[t] for t in piece_terms[i] - covered) / math.sqrt(b - a)

    heap = [(-gain(i), i) for i in range(len(pieces)) if sizes[i] <= capacity]
    heapq.heapify(heap)
    while heap and used < capacity:
        _, i = heapq.heappop(heap)
        current = gain(i)
        if current <= 0 or used + sizes[i] > capacity:  # adds nothing new, or no room
            continue
        if heap and current < -heap[0][0] - 1e-12:
            heapq.heappush(heap, (-current, i))
            continue
        chosen.append(i)
        used += sizes[i]
        covered |= piece_terms[i]
    return chosen


def _longest_fitting_prefix(text: str, span: tuple[int, int], fits: Callable[[str], bool]) -> tuple[int, int]:
    a, b = span
    lo, hi = a, b  # binary search on the end: fits(text[a:lo]) holds
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(text[a:mid]):
            lo = mid
        else:
            hi = mid - 1
    return (a, max(lo, a + 1))


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged
