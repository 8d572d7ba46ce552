"""Keyword scoring over postings held in memory: Okapi BM25 and the
full-text hit count, the two keyword channels of retriever_pg.

PostgreSQL's ``chunk_terms`` stays the store of record; this module only
scores postings read from it (``Postings``), so ranking a query costs a few
array operations instead of a grouped SQL scan of every posting of its terms
(issue 27: PostgreSQL's BM25 was the largest CPU share of a query after its
embedding). The cache that keeps postings and knows when they are stale is
``services.retriever_pg.keyword_cache``; nothing here does I/O.

Rows are small integers standing for chunks (``ChunkTable``); a posting list
holds the rows of the chunks that contain its term and the term's frequency
in each. Rankings match the SQL channels they replace, ties included:
BM25 by score then chunk id; the hit count by hits, then chunk length
(shorter first), then chunk id.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


class ChunkTable:
    """Chunk id, length in terms and collection for each row.

    Rows are given out in the order chunks are first seen and never reused
    while the table lives; the cache drops the whole table when the corpus
    changes.
    """

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._row: dict[str, int] = {}
        self._doc_len: list[int] = []
        self._collection: list[int] = []
        self._collection_code: dict[str, int] = {}
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def row(self, chunk_id: str, doc_len: int, collection: str) -> int:
        """The row of ``chunk_id``, added when new."""
        found = self._row.get(chunk_id)
        if found is not None:
            return found
        row = len(self.ids)
        self._row[chunk_id] = row
        self.ids.append(chunk_id)
        self._doc_len.append(doc_len)
        self._collection.append(self._collection_code.setdefault(collection, len(self._collection_code)))
        self._arrays = None
        return row

    def _columns(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (np.asarray(self._doc_len, dtype=np.float64), np.asarray(self._collection, dtype=np.int32))
        return self._arrays

    def lengths(self) -> np.ndarray:
        """float64 [rows]: each row's chunk length in terms."""
        return self._columns()[0]

    def in_collections(self, rows: np.ndarray, collections: Sequence[str] | None) -> np.ndarray:
        """bool [len(rows)]: the rows whose chunk is in ``collections`` (all when None)."""
        if collections is None:
            return np.ones(rows.shape[0], dtype=bool)
        codes = [self._collection_code[c] for c in collections if c in self._collection_code]
        return np.isin(self._columns()[1][rows], codes)


@dataclass(frozen=True, slots=True)
class Postings:
    """One term's postings: ``rows`` int32 [df] (ChunkTable rows, ascending)
    and ``tf`` int32 [df], the term's count in each chunk."""

    rows: np.ndarray
    tf: np.ndarray

    @property
    def df(self) -> int:
        """Number of chunks holding the term, in every collection."""
        return int(self.rows.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.tf.nbytes)


@dataclass(frozen=True, slots=True)
class KeywordHit:
    """A ranked chunk: ``score`` is BM25 or the hit count; ``matched`` the
    query terms it holds (BM25: query order; hit count: sorted)."""

    chunk_id: str
    score: float
    matched: tuple[str, ...]


def _matched(postings: dict[str, Postings], terms: Sequence[str], rows: np.ndarray) -> list[tuple[str, ...]]:
    """For each of ``rows``, the ``terms`` (in the order given) its chunk holds."""
    held = []
    for term in terms:
        p = postings[term]
        at = np.minimum(np.searchsorted(p.rows, rows), max(p.df - 1, 0))
        held.append(p.rows[at] == rows if p.df else np.zeros(rows.shape[0], dtype=bool))
    if not held:
        return [() for _ in range(rows.shape[0])]
    grid = np.stack(held, axis=1).tolist()
    return [tuple(t for t, h in zip(terms, flags) if h) for flags in grid]


def bm25(table: ChunkTable, postings: dict[str, Postings], terms: Sequence[str], top_k: int,
         collections: Sequence[str] | None, *, n: int, avgdl: float, k1: float, b: float) -> list[KeywordHit]:
    """Okapi BM25 of the chunks holding any of ``terms``.

    score(chunk) = sum over distinct query terms t in the chunk of
    idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl)),
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)), N never below df (as the
    SQL channel it replaces: PgStore.keyword_search).

    Args:
        table / postings: rows and each term's postings; every term of
            ``terms`` must have an entry (an empty one when no chunk holds it).
        terms: distinct usable query terms, in query order.
        top_k: hits wanted (> 0).
        collections: only chunks in these are ranked (None: all), and df
            counts only theirs.
        n / avgdl: chunks in ``collections`` (the store when None) and their
            mean length in terms (> 0).
        k1 / b: BM25 parameters.

    Returns:
        Up to top_k hits, highest score first, ties by chunk id.
    """
    parts_rows, parts_score = [], []
    lengths = table.lengths()
    for term in terms:
        p = postings[term]
        rows, tf = p.rows, p.tf
        if collections is not None:
            keep = table.in_collections(rows, collections)
            rows, tf = rows[keep], tf[keep]
        df = rows.shape[0]
        if df == 0:
            continue
        idf = np.log(1 + (max(float(n), float(df)) - df + 0.5) / (df + 0.5))
        norm = k1 * (1 - b + b * lengths[rows] / avgdl)
        parts_rows.append(rows)
        parts_score.append(idf * tf * (k1 + 1) / (tf + norm))
    if not parts_rows:
        return []
    rows, scores, _ = _sum_by_row(np.concatenate(parts_rows), np.concatenate(parts_score), len(table))
    chosen = _top(rows, scores, top_k, table)
    matched = _matched(postings, terms, rows[chosen])
    return [KeywordHit(table.ids[rows[i]], float(scores[i]), held) for i, held in zip(chosen, matched)]


def hit_count(table: ChunkTable, postings: dict[str, Postings], terms: Sequence[str], top_k: int,
              collections: Sequence[str] | None) -> list[KeywordHit]:
    """The chunks holding the most distinct ``terms``, then the shortest
    (length in terms), then by chunk id: the full-text channel's ordering
    (PgStore.fulltext_search; MarxSphere design, stage 2: hit count, then
    length).

    Args:
        table / postings / terms / top_k / collections: as in ``bm25``.

    Returns:
        Up to top_k hits; score = the hit count, matched terms sorted.
    """
    parts = [postings[t].rows for t in terms if postings[t].df]
    if not parts:
        return []
    rows, _, hits = _sum_by_row(np.concatenate(parts), None, len(table))
    keep = table.in_collections(rows, collections)
    rows, hits = rows[keep], hits[keep]
    # Shorter chunks first among equal hit counts: the length's share stays
    # below one, so it never reorders different hit counts.
    lengths = table.lengths()[rows]
    key = hits - lengths / (lengths.max(initial=0) + 1)
    ordered_terms = sorted(terms)
    chosen = _top(rows, key, top_k, table)
    matched = _matched(postings, ordered_terms, rows[chosen])
    return [KeywordHit(table.ids[rows[i]], float(hits[i]), held) for i, held in zip(chosen, matched)]


def _sum_by_row(rows: np.ndarray, weights: np.ndarray | None, table_rows: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(distinct rows ascending, the sum of ``weights`` per row (None
    without weights), the count per row) of postings ``rows``. Counted
    over an array of every table row when that is at most 16 times the
    postings (linear), else by sorting the postings."""
    if table_rows <= 16 * rows.shape[0]:
        counts = np.bincount(rows, minlength=table_rows)
        distinct = np.flatnonzero(counts)
        sums = None if weights is None else np.bincount(rows, weights=weights, minlength=table_rows)[distinct]
        return distinct, sums, counts[distinct]
    distinct, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
    return distinct, None if weights is None else np.bincount(inverse, weights=weights), counts


def _top(rows: np.ndarray, scores: np.ndarray, top_k: int, table: ChunkTable) -> list[int]:
    """Positions of the top_k ``scores``, highest first, ties by chunk id
    ascending: every position scoring at least the top_k-th score is sorted
    exactly, so ties at the cut are decided by chunk id as in SQL."""
    if rows.size == 0:
        return []
    positions = np.arange(rows.size)
    if rows.size > top_k:
        cut = np.partition(scores, rows.size - top_k)[rows.size - top_k]
        positions = np.flatnonzero(scores >= cut)
    ranked = sorted(positions.tolist(), key=lambda i: (-scores[i], table.ids[rows[i]]))
    return ranked[:top_k]
