"""Entity cards in PostgreSQL: the keyword and vector channels of entity
search (issue 4; Guizhou design, the Guizhou indicator GraphRAG design (docs/references.md) section 6: an indicator card
is name, category, aliases and definition, searched by keywords and by
embedding).

Schema (migration 3 of ``store.py``):

- ``entity_cards(name, category, definition, aliases, parents, card,
  gram_count, content_hash)``: one row per library entity.
- ``entity_surfaces(entity_name, ordinal, surface, embedding)``: the name
  (ordinal 0) and each alias, with its embedding; HNSW index. An entity is
  as close to the query as its closest surface, because an alias query is
  usually nearer one of the other aliases than the whole card (measured on
  the medkg alias dev set: max over surfaces recall@10 0.39, card text 0.33).
- ``entity_grams(gram, entity_name, tf, doc_len)``: character unigrams and
  bigrams of the surfaces, for Okapi BM25. Characters, not jieba words,
  because names and aliases are short, often rare words jieba does not
  know, and a misspelt or partial name still shares most of its characters.

Migration 4 (``entity_collection_migration``) puts every card in a
collection: the three tables get a ``collection`` column ('default' for
cards stored before) and their keys become (collection, name).

Pure asyncio (asyncpg); no gRPC.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, AsyncContextManager, Callable, Sequence

import asyncpg
import numpy as np

from services.common.entity_skeleton import loose_key
from services.common.records import EntityHit, IngestFailureRecord, IngestResult, storable_text

#: Surfaces (name + aliases) stored per entity.
MAX_SURFACES = 16
#: Characters of a surface that make grams (longer text is not a name).
MAX_SURFACE_CHARS = 64

_HNSW = "entity_surfaces_embedding_hnsw_idx"


def entity_migration(dim: int) -> list[str]:
    """DDL of migration 3 (entity cards), for ``store._migrations``."""
    return [
        """
        CREATE TABLE IF NOT EXISTS entity_cards (
            name         text PRIMARY KEY,
            category     text NOT NULL DEFAULT '',
            definition   text NOT NULL DEFAULT '',
            aliases      text[] NOT NULL DEFAULT '{}',
            parents      text[] NOT NULL DEFAULT '{}',
            card         text NOT NULL,
            gram_count   int NOT NULL,
            content_hash text NOT NULL
        )
        """,
        f"""
        CREATE TABLE IF NOT EXISTS entity_surfaces (
            entity_name text NOT NULL REFERENCES entity_cards(name) ON DELETE CASCADE,
            ordinal     int NOT NULL,
            surface     text NOT NULL,
            embedding   vector({int(dim)}),
            PRIMARY KEY (entity_name, ordinal)
        )
        """,
        f"CREATE INDEX IF NOT EXISTS {_HNSW} ON entity_surfaces USING hnsw (embedding vector_cosine_ops)",
        """
        CREATE TABLE IF NOT EXISTS entity_grams (
            gram        text COLLATE "C" NOT NULL,
            entity_name text NOT NULL REFERENCES entity_cards(name) ON DELETE CASCADE,
            tf          int NOT NULL,
            doc_len     int NOT NULL,
            PRIMARY KEY (entity_name, gram)
        )
        """,
        "CREATE INDEX IF NOT EXISTS entity_grams_gram_idx ON entity_grams (gram) INCLUDE (entity_name, tf, doc_len)",
    ]


def entity_collection_migration() -> list[str]:
    """DDL of migration 4's entity part: collections for entity cards."""
    return [
        *(f"ALTER TABLE {t} ADD COLUMN IF NOT EXISTS collection text NOT NULL DEFAULT 'default'"
          for t in ("entity_cards", "entity_surfaces", "entity_grams")),
        "ALTER TABLE entity_surfaces DROP CONSTRAINT IF EXISTS entity_surfaces_entity_name_fkey",
        "ALTER TABLE entity_grams DROP CONSTRAINT IF EXISTS entity_grams_entity_name_fkey",
        "ALTER TABLE entity_surfaces DROP CONSTRAINT IF EXISTS entity_surfaces_pkey",
        "ALTER TABLE entity_grams DROP CONSTRAINT IF EXISTS entity_grams_pkey",
        "ALTER TABLE entity_cards DROP CONSTRAINT IF EXISTS entity_cards_pkey",
        "ALTER TABLE entity_cards ADD PRIMARY KEY (collection, name)",
        "ALTER TABLE entity_surfaces ADD PRIMARY KEY (collection, entity_name, ordinal)",
        "ALTER TABLE entity_grams ADD PRIMARY KEY (collection, entity_name, gram)",
        "ALTER TABLE entity_surfaces ADD FOREIGN KEY (collection, entity_name) "
        "REFERENCES entity_cards (collection, name) ON DELETE CASCADE",
        "ALTER TABLE entity_grams ADD FOREIGN KEY (collection, entity_name) "
        "REFERENCES entity_cards (collection, name) ON DELETE CASCADE",
        "DROP INDEX IF EXISTS entity_grams_gram_idx",
        "CREATE INDEX entity_grams_gram_idx ON entity_grams (gram) INCLUDE (entity_name, tf, doc_len, collection)",
    ]


def surface_grams(text: str) -> list[str]:
    """Character unigrams and bigrams of ``loose_key(text)`` (NFKC, lower
    case, separators removed), at most MAX_SURFACE_CHARS characters; with
    repeats (their count is the term frequency)."""
    key = loose_key(text)[:MAX_SURFACE_CHARS]
    return list(key) + [key[i : i + 2] for i in range(len(key) - 1)]


@dataclass(slots=True)
class EntityCard:
    """One entity as retriever_pg stores it.

    Attributes:
        name: canonical name (the id).
        category, definition, aliases, parents: as ingested.
        surface_embeddings: one vector per surface (name, then aliases in
            order, at most MAX_SURFACES); may be empty (keyword channel only).
    """

    name: str
    category: str = ""
    definition: str = ""
    aliases: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    surface_embeddings: list[list[float]] = field(default_factory=list)

    def surfaces(self) -> list[str]:
        """Name, then distinct aliases, at most MAX_SURFACES."""
        return list(dict.fromkeys([self.name] + [a for a in self.aliases if a.strip()]))[:MAX_SURFACES]

    def card_text(self) -> str:
        """The card: name, category, aliases, parents and definition, joined."""
        parts = [self.name, self.category, "、".join(self.aliases), "、".join(self.parents), self.definition]
        return "；".join(p for p in parts if p)


def _vector(values: Sequence[float], dim: int, what: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    if v.shape != (dim,):
        raise ValueError(f"{what} has {v.size} values, expected {dim}")
    if not np.all(np.isfinite(v)) or not np.any(v):
        raise ValueError(f"{what} must be finite and non-zero")
    return v


class EntityCardStore:
    """Keyword (BM25 over character grams) and vector (HNSW over surfaces)
    entity search; writes entity cards.

    Args:
        connect: returns an async context manager yielding a pooled
            connection (``PgStore.connection``); the schema is migrated by
            ``PgStore.migrate``.
        embedding_dim: dimension of surface and query embeddings.
        ef_search: HNSW candidate list size per query.
        bm25_k1 / bm25_b: Okapi BM25 parameters.
    """

    def __init__(
        self, connect: Callable[[], AsyncContextManager[asyncpg.Connection]], embedding_dim: int,
        *, ef_search: int = 64, bm25_k1: float = 1.2, bm25_b: float = 0.75,
    ) -> None:
        self._connect = connect
        self.embedding_dim = embedding_dim
        self.ef_search = ef_search
        self.bm25_k1 = bm25_k1
        self.bm25_b = bm25_b

    async def count(self) -> int:
        """Number of stored entity cards."""
        async with self._connect() as conn:
            return int(await conn.fetchval("SELECT count(*) FROM entity_cards"))

    async def collection_counts(self) -> dict[str, int]:
        """{collection: entity cards}."""
        async with self._connect() as conn:
            return {r["collection"]: int(r["n"]) for r in await conn.fetch(
                "SELECT collection, count(*) AS n FROM entity_cards GROUP BY collection ORDER BY collection")}

    async def delete_collection(self, collection: str) -> int:
        """Deletes every card of ``collection`` (surfaces and grams
        cascade); returns how many cards went."""
        async with self._connect() as conn:
            status = await conn.execute("DELETE FROM entity_cards WHERE collection = $1", collection)
        return int(status.rsplit(" ", 1)[-1])

    async def ingest(self, cards: list[EntityCard], collection: str = "default") -> IngestResult:
        """Stores ``cards`` in ``collection``, replacing stored cards of the
        same name there; a card whose content (fields and embeddings) is
        unchanged is left alone. One transaction for the call.

        Returns:
            IngestResult: stored, unchanged, failures (index in ``cards``,
            name, reason: blank name, repeated name, wrong embedding size,
            more embeddings than surfaces).

        Raises:
            RuntimeError: store not open. asyncpg.PostgresError: write failed
                (nothing of this call is stored).
        """
        result = IngestResult()
        rows: dict[str, tuple[int, EntityCard, str, list[tuple], list[tuple]]] = {}
        for index, card in enumerate(cards):
            name = card.name.strip()
            if not name:
                result.failures.append(IngestFailureRecord(index, name, "name must not be blank"))
                continue
            if not storable_text(card.card_text()):
                result.failures.append(IngestFailureRecord(index, name, "text contains NUL or is not valid UTF-8"))
                continue
            if name in rows:
                result.failures.append(IngestFailureRecord(index, name, f"duplicate name in this batch (first at index {rows[name][0]})"))
                continue
            surfaces = card.surfaces()
            if len(card.surface_embeddings) > len(surfaces):
                result.failures.append(IngestFailureRecord(index, name, f"{len(card.surface_embeddings)} embeddings for {len(surfaces)} surfaces"))
                continue
            try:
                vectors = [_vector(v, self.embedding_dim, f"surface embedding {i}") for i, v in enumerate(card.surface_embeddings)]
            except ValueError as exc:
                result.failures.append(IngestFailureRecord(index, name, str(exc)))
                continue
            grams = Counter(g for s in surfaces for g in surface_grams(s))
            digest = hashlib.sha256(json.dumps(
                [name, card.category, card.definition, card.aliases, card.parents, [v.round(5).tolist() for v in vectors]],
                ensure_ascii=False).encode()).hexdigest()
            surface_rows = [(collection, name, i, s, vectors[i] if i < len(vectors) else None) for i, s in enumerate(surfaces)]
            doc_len = sum(grams.values())
            gram_rows = [(collection, g, name, tf, doc_len) for g, tf in grams.items()]
            rows[name] = (index, card, digest, surface_rows, gram_rows)
        if not rows:
            return result
        names = list(rows)
        async with self._connect() as conn:
            async with conn.transaction():
                existing = {r["name"]: r["content_hash"] for r in await conn.fetch(
                    "SELECT name, content_hash FROM entity_cards WHERE collection = $1 AND name = ANY($2::text[])",
                    collection, names)}
                todo = [n for n in names if existing.get(n) != rows[n][2]]
                replaced = [n for n in todo if n in existing]
                if replaced:
                    await conn.execute("DELETE FROM entity_cards WHERE collection = $1 AND name = ANY($2::text[])",
                                       collection, replaced)
                if todo:
                    await conn.copy_records_to_table("entity_cards", columns=[
                        "collection", "name", "category", "definition", "aliases", "parents", "card", "gram_count",
                        "content_hash"], records=[
                        (collection, n, rows[n][1].category, rows[n][1].definition, list(rows[n][1].aliases),
                         list(rows[n][1].parents), rows[n][1].card_text(), len(rows[n][4]), rows[n][2]) for n in todo])
                    await conn.copy_records_to_table(
                        "entity_surfaces", columns=["collection", "entity_name", "ordinal", "surface", "embedding"],
                        records=[r for n in todo for r in rows[n][3]])
                    await conn.copy_records_to_table(
                        "entity_grams", columns=["collection", "gram", "entity_name", "tf", "doc_len"],
                        records=[r for n in todo for r in rows[n][4]])
        result.stored, result.unchanged = len(todo), len(names) - len(todo)
        return result

    async def keyword_search(self, query: str, top_k: int, collections: Sequence[str] = ("default",)) -> list[EntityHit]:
        """Okapi BM25 of the query's character grams against each entity's
        surface grams (formula as ``PgStore.keyword_search``; N = entities,
        doc_len = grams of the entity's surfaces), over the cards of
        ``collections`` (N, avgdl and df counted there).

        Returns:
            Up to top_k hits, best first; channel "pg.entity_keyword",
            score = BM25 divided by the query's best score (so in (0, 1]),
            matched = the surface sharing most grams with the query.
        """
        grams = list(dict.fromkeys(surface_grams(query)))
        if top_k <= 0 or not grams:
            return []
        async with self._connect() as conn:
            n, avgdl = await conn.fetchrow(
                "SELECT count(*)::float8, coalesce(avg(gram_count), 0)::float8 FROM entity_cards WHERE collection = ANY($1::text[])",
                list(collections))
            if not n or not avgdl:
                return []
            rows = await conn.fetch(
                """
                WITH q AS (SELECT DISTINCT unnest($1::text[]) AS gram),
                df AS (
                    SELECT q.gram, ln(1 + (greatest($2, count(*)::float8) - count(*) + 0.5) / (count(*) + 0.5)) AS idf
                    FROM q JOIN entity_grams g ON g.gram = q.gram WHERE g.collection = ANY($7::text[]) GROUP BY q.gram
                ), scored AS (
                    SELECT g.collection, g.entity_name, sum(df.idf * g.tf * ($3 + 1)
                           / (g.tf + $3 * (1 - $4 + $4 * g.doc_len / $5))) AS score
                    FROM df JOIN entity_grams g ON g.gram = df.gram WHERE g.collection = ANY($7::text[])
                    GROUP BY g.collection, g.entity_name ORDER BY score DESC, g.entity_name, g.collection LIMIT $6
                )
                SELECT c.name, c.category, c.definition, c.aliases, s.score,
                       ARRAY(SELECT surface FROM entity_surfaces es WHERE es.collection = c.collection
                             AND es.entity_name = c.name ORDER BY ordinal) AS surfaces
                FROM scored s JOIN entity_cards c ON c.collection = s.collection AND c.name = s.entity_name
                ORDER BY s.score DESC, c.name
                """,
                grams, n, float(self.bm25_k1), float(self.bm25_b), avgdl, top_k, list(collections),
            )
        if not rows:
            return []
        best = rows[0]["score"] or 1.0
        qset = set(grams)
        return [
            _hit(r, "pg.entity_keyword", r["score"] / best,
                 max(r["surfaces"], key=lambda s: len(qset & set(surface_grams(s))), default=r["name"]))
            for r in rows
        ]

    async def vector_search(self, embedding: Sequence[float], top_k: int,
                            collections: Sequence[str] = ("default",)) -> list[EntityHit]:
        """Nearest entities of ``collections`` by the cosine of their closest
        surface (HNSW over surfaces with iterative scan, 4 x top_k surfaces
        read, grouped by entity).

        Returns:
            Up to top_k hits, best first; channel "pg.entity_vector",
            score = cosine in [-1, 1], matched = the closest surface.

        Raises:
            ValueError: wrong dimension, NaN/inf or zero vector.
        """
        if top_k <= 0:
            return []
        query = _vector(embedding, self.embedding_dim, "query embedding")
        limit = 4 * top_k
        async with self._connect() as conn:
            async with conn.transaction(readonly=True):
                await conn.execute("SELECT set_config('hnsw.ef_search', $1, true)", str(min(max(self.ef_search, limit), 1000)))
                await conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
                rows = await conn.fetch(
                    """
                    WITH nn AS MATERIALIZED (
                        SELECT collection, entity_name, surface, embedding <=> $1::vector AS dist FROM entity_surfaces
                        WHERE embedding IS NOT NULL AND collection = ANY($4::text[])
                        ORDER BY embedding <=> $1::vector LIMIT $2
                    ), best AS (
                        SELECT DISTINCT ON (collection, entity_name) collection, entity_name, surface, dist
                        FROM nn ORDER BY collection, entity_name, dist
                    )
                    SELECT c.name, c.category, c.definition, c.aliases, 1 - b.dist AS score, b.surface
                    FROM best b JOIN entity_cards c ON c.collection = b.collection AND c.name = b.entity_name
                    ORDER BY b.dist, c.name LIMIT $3
                    """,
                    query, limit, top_k, list(collections),
                )
        return [_hit(r, "pg.entity_vector", r["score"], r["surface"]) for r in rows]


def _hit(row: Any, channel: str, score: float, matched: str) -> EntityHit:
    score = float(score)
    return EntityHit(
        name=row["name"], category=row["category"], definition=row["definition"], aliases=list(row["aliases"])[:20],
        degree=0, channel=channel, score=score if math.isfinite(score) else 0.0, matched=matched, relation="direct",
    )
