"""Postings of recently asked terms, read from PostgreSQL's ``chunk_terms``
and kept in retriever_pg's memory for the keyword channels
(``keyword_index``).

Staleness: every statement that writes ``chunk_terms`` bumps the sequence
``chunk_terms_generation`` (a trigger, migration 6), and PgStore bumps it
again after each of its own write transactions commits. Each lookup reads
the sequence first; a new value drops every cached posting list, so a
replica sees another replica's ingest on its next query. A writer outside
PgStore whose transaction commits after its trigger's bump, or a restore
that sets the sequence back, is seen within ``ttl_s`` (the whole cache is
dropped that often, like the BM25 corpus statistics).

Memory: posting lists are evicted least recently used beyond
``budget_bytes`` (8 bytes a posting); the chunk table (id, length and
collection of each chunk seen) lives until the next drop.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Sequence

import asyncpg
import numpy as np

from services.common.metrics import KEYWORD_POSTINGS_BYTES, KEYWORD_POSTINGS_LOOKUPS
from services.retriever_pg.keyword_index import ChunkTable, Postings

#: The sequence every write to chunk_terms advances (migration 6).
GENERATION_SEQUENCE = "chunk_terms_generation"

_EMPTY = Postings(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32))


class KeywordCache:
    """Posting lists by term, with the chunk table their rows index.

    Args:
        budget_bytes: most bytes of posting lists kept (> 0).
        ttl_s: seconds after which everything is dropped whatever the
            generation says (> 0).
    """

    def __init__(self, budget_bytes: int, ttl_s: float = 60.0) -> None:
        if budget_bytes <= 0 or ttl_s <= 0:
            raise ValueError(f"budget_bytes and ttl_s must be > 0, got {budget_bytes}, {ttl_s}")
        self.budget_bytes = budget_bytes
        self.ttl_s = ttl_s
        self._generation: int | None = None
        self._dropped_at = time.monotonic()
        self._table = ChunkTable()
        self._entries: OrderedDict[str, Postings] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def cached_bytes(self) -> int:
        """Bytes of posting lists held now."""
        return self._bytes

    def drop(self) -> None:
        """Forgets every posting list and the chunk table (the corpus changed)."""
        self._table = ChunkTable()
        self._entries.clear()
        self._bytes = 0
        self._dropped_at = time.monotonic()
        KEYWORD_POSTINGS_BYTES.set(0)

    async def lookup(self, conn: asyncpg.Connection, terms: Sequence[str]) -> tuple[ChunkTable, dict[str, Postings]]:
        """The posting lists of ``terms`` (an empty one for a term no chunk
        holds) and the table their rows index, reading from ``conn`` the
        generation and the lists not cached.

        The table and lists returned belong together even when the cache is
        dropped meanwhile (by another query seeing a newer generation).

        Raises:
            asyncpg.PostgresError: a statement failed.
        """
        generation = int(await conn.fetchval(f"SELECT last_value FROM {GENERATION_SEQUENCE}"))
        if generation != self._generation or time.monotonic() - self._dropped_at > self.ttl_s:
            self.drop()
            self._generation = generation
        table = self._table
        found: dict[str, Postings] = {}
        missing: list[str] = []
        for term in terms:
            entry = self._entries.get(term)
            if entry is None:
                missing.append(term)
            else:
                self._entries.move_to_end(term)
                found[term] = entry
        self.hits += len(found)
        self.misses += len(missing)
        KEYWORD_POSTINGS_LOOKUPS.labels("hit").inc(len(found))
        KEYWORD_POSTINGS_LOOKUPS.labels("miss").inc(len(missing))
        if missing:
            rows = await conn.fetch("SELECT term, chunk_id, tf, doc_len, collection FROM chunk_terms"
                                    " WHERE term = ANY($1::text[])", missing)
            loaded = _postings(table, missing, rows)
            found.update(loaded)
            if table is self._table:  # not dropped while reading
                for term, postings in loaded.items():
                    self._keep(term, postings)
                KEYWORD_POSTINGS_BYTES.set(self._bytes)
        return table, found

    def _keep(self, term: str, postings: Postings) -> None:
        if postings.nbytes > self.budget_bytes:
            return
        old = self._entries.pop(term, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._entries[term] = postings
        self._bytes += postings.nbytes
        while self._bytes > self.budget_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes


def _postings(table: ChunkTable, terms: Sequence[str], records: Sequence[asyncpg.Record]) -> dict[str, Postings]:
    """Posting lists (rows ascending) of ``terms`` from chunk_terms records,
    adding their chunks to ``table``."""
    by_term: dict[str, tuple[list[int], list[int]]] = {t: ([], []) for t in terms}
    for term, chunk_id, tf, doc_len, collection in records:
        rows, tfs = by_term[term]
        rows.append(table.row(chunk_id, doc_len, collection))
        tfs.append(tf)
    out = {}
    for term, (rows, tfs) in by_term.items():
        if not rows:
            out[term] = _EMPTY
            continue
        row_array = np.asarray(rows, dtype=np.int32)
        order = np.argsort(row_array, kind="stable")
        out[term] = Postings(row_array[order], np.asarray(tfs, dtype=np.int32)[order])
    return out
