"""PostgreSQL storage for retriever_pg: schema migrations, ingestion writes,
pgvector HNSW search and Okapi BM25 keyword search over chunks.

Pure asyncio (asyncpg); no gRPC. Takes and returns the plain records of
``services.common.records``.

Schema (migration 1):

- ``documents(id, title, heading_path, metadata, content_hash, ingested_at[, collection, source, script])``
- ``chunks(id, document_id → documents, ordinal, heading_path, text,
  parent_context, embedding vector(D), term_count)``, HNSW index
  (``vector_cosine_ops``) on ``embedding``.
- ``chunk_terms(term, chunk_id → chunks, tf, doc_len[, collection])``, one row per distinct
  term of a chunk; index on ``term`` INCLUDE ``(chunk_id, tf, doc_len)`` so a
  BM25 query reads postings with index-only scans.

Migration 2 adds a trigram index on chunk text; migration 3 the entity
cards of ``entity_store``; migration 4 collections and metadata filters:
``documents.collection`` (default 'default', so a store ingested before
collections keeps working as the "default" collection) and
``documents.source``, an index on (collection, id), a GIN index on
``documents.metadata``, ``chunks.metadata`` (page numbers), and the
collection column of the entity cards (their keys become (collection, name));
migration 5 each collection's domain pack, 6 the postings generation, 7
``documents.script``, each document's writing system (Candidate.script),
backfilled from the chunks of documents stored before it.

Every search channel takes a scope (collections and metadata conditions,
``filter_sql``) and applies it inside its query before its LIMIT, so a
filtered search still returns top_k hits when that many match.

Keyword terms come from ``services.common.text`` (jieba); PostgreSQL text
search configurations are not used.

Deadlines and recovery: every pooled connection is handed out with
``SET statement_timeout`` = the current RPC's remaining deadline
(``services.common.store_deadline``), at most the read ceiling; writes and
maintenance get the deadline only (``_conn(write=True)``). PostgreSQL
itself cancels a statement that runs past it (SQLSTATE 57014), raised as
``StoreTimeout``. Why a session SET and not asyncpg's ``timeout=``: the
server enforces it even when the client is stuck or gone, it needs no
second connection to send a cancel request (asyncpg's ``timeout=`` cancels
client-side, then asks the server to cancel over a new connection, which
is what fails first when the server is overloaded), it covers every
statement of the connection's use (including COPY and the statements of a
transaction, each with the budget left when the connection was handed
out) without passing a timeout to each call, and the pool's ``RESET ALL``
on release undoes it (no SET LOCAL, which would need a transaction around
every read). The SET doubles as a liveness check: a connection that died
with a restarted server is dropped, the pool's connections are expired, and
one fresh connection is tried before anything was sent, so reads and
writes alike are safe to retry.
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import struct
import time
from collections import Counter, OrderedDict
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncContextManager, AsyncIterator, Iterable, Sequence

import asyncpg

import domains
import numpy as np

from services.common.filters import Condition
from services.common.metrics import VECTOR_SEARCH_PLANS
from services.common.store_deadline import QueryBudget, StoreTimeout, deadline_scope, milliseconds
from services.common.text import writing_system
from services.retriever_pg.entity_store import entity_collection_migration, entity_migration
from services.retriever_pg import keyword_index
from services.retriever_pg.keyword_cache import GENERATION_SEQUENCE, KeywordCache
from services.retriever_pg.filter_sql import Params, scope_sql
from services.retriever_pg import lifecycle
from services.retriever_pg.parent_context import SectionChunk
from services.common.records import (
    text_digest,
    VERSION_MARKS,
    version_key,
    Deletion,
    StoredDocumentInfo,
    DocumentRecord,
    storable_text,
    Hit,
    IngestFailureRecord,
    IngestResult,
)

__all__ = ["PgStore", "LATEST_SCHEMA_VERSION", "MAX_TERM_CHARS"]

_log = logging.getLogger(__name__)

#: Advisory lock key (bigint form) held while migrations run.
_MIGRATION_LOCK_KEY = 0x4752_4D53_4D49_47  # "GRMSMIG"
#: Seed for the per-document advisory locks taken while ingesting.
_DOC_LOCK_SEED = 0x4744_4F43  # "GDOC"

#: Terms longer than this (characters) are not stored or searched: they carry
#: no retrieval value and could exceed the btree row size limit.
MAX_TERM_CHARS = 256
#: pgvector's HNSW index supports at most 2000 dimensions for ``vector``.
_MAX_HNSW_DIM = 2000
#: pgvector caps hnsw.ef_search at 1000.
_MAX_EF_SEARCH = 1000
#: Cached corpus stats are reloaded after this many seconds (other replicas
#: may have ingested meanwhile).
_STATS_TTL_S = 60.0
#: Fewest chunks of a writing system whose mean is taken as its centroid (``PgStore.script_centroids``); a
#: scope holding a system with fewer is not centred (``PgBackend._dense``): one chunk's mean is itself.
MIN_CENTROID_CHUNKS = 2
#: A scope whose writing-system centroids took this long to read keeps them for _STATS_TTL_S after writes
#: (``PgStore.script_centroids``); quicker ones are read again after every write.
_SLOW_CENTROIDS_S = 0.05
#: Ingestion writes documents in one transaction per batch of this many
#: documents (or chunks), falling back to one transaction per document when
#: a batch fails.
_BATCH_DOCS = 200
_BATCH_CHUNKS = 4000
#: ingest_documents loads without the HNSW index (rebuilt at the end, much
#: faster than incremental inserts) when a call brings at least this many
#: chunks and at least as many as are already stored.
_BULK_MIN_CHUNKS = 2000
#: An ingest into a store holding fewer chunks than this starts an initial
#: load: the HNSW index is dropped, and built once no ingest has come for
#: the load's quiet time (pgvector's advice for a first load: insert the
#: data, then index it). 26,000 vectors sent in statements of 256: 29.6 s
#: with the index kept row by row, 4.5 s + a 4.2 s build without
#: (bench/hnsw_first_load.py; docs/retrieval.md, "The first load").
_INITIAL_LOAD_MAX_CHUNKS = _BULK_MIN_CHUNKS
#: An initial load's quiet time is three times the longest pause between
#: its calls (a slow embedder sends them further apart), at least the
#: ``initial_load_quiet_s`` setting and at most this many seconds.
_INITIAL_LOAD_QUIET_MAX_S = 60.0
#: Bytes per row the in-memory HNSW graph of pgvector 0.8 (m = 16) needs
#: beside the vector itself: the element header and its neighbour lists
#: (bench/scale_million.py measured 2.0 KB a row on disk for 384-d).
_HNSW_ROW_BYTES_BEYOND_VECTOR = 1024
#: Floor of the build's maintenance_work_mem, MiB.
_INDEX_BUILD_MEM_MIN_MB = 64
#: A vector search whose scope the planner estimates at most this many
#: chunks, and at most _EXACT_SCOPE_MAX_SHARE of all chunks, scans the scope
#: exactly instead of the HNSW index: a selective scope makes the iterative
#: scan walk ~top_k / share index entries and lose recall (bench/
#: scale_million.py, 1M chunks, a 1% collection: iterative p50 132 ms,
#: recall@10 0.80; exact 45 ms, 1.0).
_EXACT_SCOPE_MAX_CHUNKS = 20_000
_EXACT_SCOPE_MAX_SHARE = 0.05
#: Scopes whose estimated size is remembered (for _STATS_TTL_S seconds).
_SCOPE_CACHE_SIZE = 256

_HNSW_INDEX = "chunks_embedding_hnsw_idx"
_HNSW_INDEX_SQL = (
    f"CREATE INDEX IF NOT EXISTS {_HNSW_INDEX} ON chunks USING hnsw (embedding vector_cosine_ops)"
)

#: A pooled connection that died (server restarted, connection cut).
_CONNECTION_ERRORS = (asyncpg.PostgresConnectionError, asyncpg.InterfaceError, ConnectionError, OSError)

_WRITE_ERRORS = (asyncpg.PostgresError, ValueError, TypeError, OverflowError, struct.error)

_DOC_COLUMNS = ["id", "title", "heading_path", "metadata", "content_hash", "collection", "source", "script", "text_digest"]
_CHUNK_COLUMNS = [
    "id", "document_id", "ordinal", "heading_path", "text",
    "parent_context", "embedding", "term_count", "metadata",
]
_TERM_COLUMNS = ["term", "chunk_id", "tf", "doc_len", "collection"]


#: PostgreSQL regex classes of what is not a CJK character, and not a letter (Latin letters and CJK
#: characters: the letters that decide a writing system), for migration 7's backfill; the ranges are
#: those of services.common.text's CJK characters.
_CJK_RANGES = r"\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff"
_NOT_CJK_CLASS = f"[^{_CJK_RANGES}]"
_NOT_LETTER_CLASS = f"[^A-Za-z\\u00c0-\\u024f{_CJK_RANGES}]"


def _migrations(dim: int) -> list[tuple[int, list[str]]]:
    """Ordered (version, statements). Append new versions; never edit old ones."""
    return [
        (
            1,
            [
                "CREATE EXTENSION IF NOT EXISTS vector",
                "CREATE EXTENSION IF NOT EXISTS pg_trgm",
                """
                CREATE TABLE IF NOT EXISTS documents (
                    id           text PRIMARY KEY,
                    title        text NOT NULL DEFAULT '',
                    heading_path text[] NOT NULL DEFAULT '{}',
                    metadata     jsonb NOT NULL DEFAULT '{}'::jsonb,
                    content_hash text NOT NULL,
                    ingested_at  timestamptz NOT NULL DEFAULT now()
                )
                """,
                f"""
                CREATE TABLE IF NOT EXISTS chunks (
                    id             text PRIMARY KEY,
                    document_id    text NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
                    ordinal        int NOT NULL,
                    heading_path   text[] NOT NULL DEFAULT '{{}}',
                    text           text NOT NULL,
                    parent_context text NOT NULL DEFAULT '',
                    embedding      vector({int(dim)}),
                    term_count     int NOT NULL DEFAULT 0
                )
                """,
                "CREATE INDEX IF NOT EXISTS chunks_document_idx ON chunks (document_id, ordinal)",
                _HNSW_INDEX_SQL,
                """
                CREATE TABLE IF NOT EXISTS chunk_terms (
                    term     text COLLATE "C" NOT NULL,
                    chunk_id text NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
                    tf       int NOT NULL,
                    doc_len  int NOT NULL,
                    PRIMARY KEY (chunk_id, term)
                )
                """,
                "CREATE INDEX IF NOT EXISTS chunk_terms_term_idx "
                "ON chunk_terms (term) INCLUDE (chunk_id, tf, doc_len)",
                "CREATE INDEX IF NOT EXISTS documents_title_trgm_idx "
                "ON documents USING gin (title gin_trgm_ops)",
            ],
        ),
        (
            # Trigrams on chunk text for short or unsegmentable queries.
            2,
            [
                "CREATE INDEX IF NOT EXISTS chunks_text_trgm_idx ON chunks USING gin (text gin_trgm_ops)",
            ],
        ),
        # Entity cards: keyword and vector channels of entity search.
        (3, entity_migration(dim)),
        (
            # Collections and metadata filters (issue 15).
            4,
            [
                "ALTER TABLE documents ADD COLUMN IF NOT EXISTS collection text NOT NULL DEFAULT 'default'",
                "ALTER TABLE documents ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT ''",
                "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS metadata jsonb NOT NULL DEFAULT '{}'::jsonb",
                "CREATE INDEX IF NOT EXISTS documents_collection_idx ON documents (collection, id)",
                "CREATE INDEX IF NOT EXISTS documents_metadata_idx ON documents USING gin (metadata jsonb_path_ops)",
                # The collection beside each posting, in the covering index, so
                # keyword channels scope a query without a join.
                "ALTER TABLE chunk_terms ADD COLUMN IF NOT EXISTS collection text NOT NULL DEFAULT 'default'",
                "DROP INDEX IF EXISTS chunk_terms_term_idx",
                "CREATE INDEX chunk_terms_term_idx ON chunk_terms (term) INCLUDE (chunk_id, tf, doc_len, collection)",
                *entity_collection_migration(),
            ],
        ),
        (
            # Domain packs: each collection's pack (domains/). Collections
            # stored before packs existed were read as Chinese statutes and
            # keep that pack.
            5,
            [
                "CREATE TABLE IF NOT EXISTS collections ("
                " name text PRIMARY KEY, domain_pack text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())",
                "INSERT INTO collections (name, domain_pack) SELECT DISTINCT collection, 'law_zh' FROM documents "
                "ON CONFLICT DO NOTHING",
            ],
        ),
        (
            # The postings generation (keyword_cache): every statement
            # writing chunk_terms advances it, from any client.
            6,
            [
                f"CREATE SEQUENCE IF NOT EXISTS {GENERATION_SEQUENCE}",
                "CREATE OR REPLACE FUNCTION chunk_terms_changed() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN PERFORM nextval('{GENERATION_SEQUENCE}'); RETURN NULL; END $$",
                "DROP TRIGGER IF EXISTS chunk_terms_changed ON chunk_terms",
                "CREATE TRIGGER chunk_terms_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON chunk_terms"
                " FOR EACH STATEMENT EXECUTE FUNCTION chunk_terms_changed()",
            ],
        ),
        (
            # Each document's writing system (Candidate.script), for the fuser's per-script
            # normalisation of dense similarity; documents stored before it are read once here,
            # with the rule of services.common.text.writing_system (letters counted as Latin
            # letters and CJK characters).
            7,
            [
                "ALTER TABLE documents ADD COLUMN IF NOT EXISTS script text NOT NULL DEFAULT ''",
                "UPDATE documents d SET script = CASE WHEN s.letters = 0 THEN '' "
                "WHEN 20 * s.cjk < s.letters THEN 'latin' ELSE 'cjk' END "
                "FROM (SELECT document_id,"
                f" sum(length(regexp_replace(text, '{_NOT_CJK_CLASS}', '', 'g'))) AS cjk,"
                f" sum(length(regexp_replace(text, '{_NOT_LETTER_CLASS}', '', 'g'))) AS letters"
                " FROM chunks GROUP BY document_id) s WHERE s.document_id = d.id",
            ],
        ),
        (
            # Each document's text digest (services.common.records.text_digest), so that a file whose
            # text is already stored under another name is reported (FileOutcome.duplicate_of);
            # documents stored before it are digested here from their chunks, as the code does.
            8,
            [
                "ALTER TABLE documents ADD COLUMN IF NOT EXISTS text_digest text NOT NULL DEFAULT ''",
                "UPDATE documents d SET text_digest = s.digest FROM (SELECT document_id,"
                " encode(sha256(convert_to(string_agg(text, E'\\x1e' ORDER BY ordinal), 'UTF8')), 'hex') AS digest"
                " FROM chunks GROUP BY document_id) s WHERE s.document_id = d.id",
                "CREATE INDEX IF NOT EXISTS documents_text_digest_idx ON documents (collection, text_digest)",
                "CREATE INDEX IF NOT EXISTS documents_title_idx ON documents (collection, title)",
            ],
        ),
    ]


#: Highest schema version this code knows.
LATEST_SCHEMA_VERSION = max(v for v, _ in _migrations(1))


# ---------------------------------------------------------------- codecs


def _encode_vector(value: Any) -> bytes:
    """pgvector binary input: uint16 dim, uint16 unused, dim big-endian float4."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)  # already encoded by _vector_bytes
    arr = np.asarray(value, dtype=">f4")
    if arr.ndim != 1:
        raise ValueError("vector must be one-dimensional")
    return struct.pack(">HH", arr.shape[0], 0) + arr.tobytes()


def _decode_vector(data: bytes) -> list[float]:
    dim, _ = struct.unpack_from(">HH", data)
    return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(float).tolist()


def _encode_jsonb(value: Any) -> bytes:
    return b"\x01" + json.dumps(value, ensure_ascii=False).encode("utf-8")


def _decode_jsonb(data: bytes) -> Any:
    return json.loads(data[1:])


async def _register_codecs(conn: asyncpg.Connection) -> None:
    """Binary codecs for jsonb and (when the extension exists) pgvector's
    ``vector``; binary so that COPY can send them."""
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=_encode_jsonb, decoder=_decode_jsonb, format="binary"
    )
    schema = await conn.fetchval(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'"
    )
    if schema is not None:
        await conn.set_type_codec(
            "vector", schema=schema, encoder=_encode_vector, decoder=_decode_vector, format="binary"
        )


# ------------------------------------------------------------ validation


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False


def _check_str(value: Any, what: str) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL character")
    if not storable_text(value):
        raise ValueError(f"{what} is not valid UTF-8 (lone surrogate)")


def _check_str_list(value: Any, what: str) -> None:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{what} must be a list of strings")
    for i, item in enumerate(value):
        _check_str(item, f"{what}[{i}]")


def _vector_bytes(values: Sequence[float], dim: int, what: str) -> bytes:
    """Validates and encodes one embedding.

    Raises:
        ValueError: wrong length, non-finite value, zero norm.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.shape[0] != dim:
        raise ValueError(f"{what} has dimension {arr.size}, expected {dim}")
    arr32 = arr.astype(">f4")
    if not np.isfinite(arr32).all():
        raise ValueError(f"{what} contains NaN or infinite values (as float4)")
    if not np.any(arr32):
        raise ValueError(f"{what} is the zero vector (cosine undefined)")
    return struct.pack(">HH", dim, 0) + arr32.tobytes()


def _usable_term(term: Any) -> bool:
    return bool(term) and storable_text(term) and len(term) <= MAX_TERM_CHARS


@dataclass(slots=True)
class _Prepared:
    index: int
    id: str
    content_hash: str
    doc_row: tuple
    chunk_rows: list[tuple]
    term_rows: list[tuple]
    collection: str = "default"
    domain_pack: str = ""


def _prepare(index: int, doc: DocumentRecord, dim: int) -> _Prepared:
    """Validates ``doc`` and builds its COPY rows.

    Raises:
        ValueError: a field PostgreSQL would reject or that breaks the schema's
            invariants (NUL characters, wrong embedding dimension, NaN,
            duplicate chunk ids, chunk of another document).
    """
    _check_str(doc.id, "document id")
    if not doc.id:
        raise ValueError("document id is empty")
    _check_str(doc.title, "title")
    _check_str(doc.content_hash, "content_hash")
    _check_str_list(doc.heading_path, "heading_path")
    if not isinstance(doc.metadata, dict):
        raise ValueError("metadata must be a dict")
    if _has_nul(doc.metadata):
        raise ValueError("metadata contains a NUL character")
    # TypeError when not JSON-able, UnicodeEncodeError (a ValueError) on lone surrogates
    json.dumps(doc.metadata, ensure_ascii=False).encode("utf-8")
    collection = getattr(doc, "collection", "") or "default"
    _check_str(collection, "collection")
    _check_str(getattr(doc, "source", ""), "source")
    script = writing_system(" ".join(chunk.text for chunk in doc.chunks if isinstance(chunk.text, str)))
    digest = text_digest([c.text for c in sorted(doc.chunks, key=lambda c: c.ordinal)])
    doc_row = (doc.id, doc.title, list(doc.heading_path), doc.metadata, doc.content_hash, collection, doc.source, script,
               digest)

    chunk_rows: list[tuple] = []
    term_rows: list[tuple] = []
    seen: set[str] = set()
    for pos, chunk in enumerate(doc.chunks):
        what = f"chunk {pos}"
        _check_str(chunk.id, f"{what} id")
        if not chunk.id:
            raise ValueError(f"{what} has an empty id")
        if chunk.id in seen:
            raise ValueError(f"duplicate chunk id {chunk.id!r}")
        seen.add(chunk.id)
        if chunk.document_id and chunk.document_id != doc.id:
            raise ValueError(f"{what} ({chunk.id!r}) belongs to document {chunk.document_id!r}")
        if not isinstance(chunk.ordinal, int) or isinstance(chunk.ordinal, bool):
            raise ValueError(f"{what} ordinal must be an int")
        _check_str(chunk.text, f"{what} text")
        _check_str(chunk.parent_context, f"{what} parent_context")
        _check_str_list(chunk.heading_path, f"{what} heading_path")
        _check_str_list(chunk.terms, f"{what} terms")
        if not isinstance(chunk.metadata, dict) or _has_nul(chunk.metadata):
            raise ValueError(f"{what} metadata must be a dict without NUL characters")
        embedding = (
            _vector_bytes(chunk.embedding, dim, f"{what} embedding") if len(chunk.embedding) else None
        )
        terms = chunk.terms
        doc_len = len(terms)
        chunk_rows.append(
            (chunk.id, doc.id, chunk.ordinal, list(chunk.heading_path), chunk.text,
             chunk.parent_context, embedding, doc_len, dict(chunk.metadata))
        )
        for term, tf in Counter(t for t in terms if _usable_term(t)).items():
            term_rows.append((term, chunk.id, tf, doc_len, collection))
    pack = getattr(doc, "domain_pack", "") or ""
    if pack:
        domains.get_pack(pack)  # UnknownPack is a ValueError
    return _Prepared(index, doc.id, doc.content_hash, doc_row, chunk_rows, term_rows, collection, pack)


def _term_scope(collections: Sequence[str] | None, conditions: Sequence[Condition], params: Params) -> str:
    """JOIN + WHERE text scoping postings ``ct``: the collection from the
    posting itself (covering index), metadata conditions through the
    chunk's document (joined only when there are conditions)."""
    where = f"ct.collection = ANY({params.add(list(collections))}::text[])" if collections is not None else "TRUE"
    if not conditions:
        return f" WHERE {where}"
    return (" JOIN chunks sc ON sc.id = ct.chunk_id JOIN documents sd ON sd.id = sc.document_id"
            f" WHERE {where} AND {scope_sql(None, conditions, params, 'sd')}")


def _hit(row: asyncpg.Record, channel: str, score: float, evidence: str = "") -> Hit:
    return Hit(
        chunk_id=row["id"],
        document_id=row["document_id"],
        title=row["title"],
        heading_path=list(row["heading_path"] or []),
        text=row["text"],
        ordinal=row["ordinal"],
        channel=channel,
        score=float(score),
        evidence=evidence,
        embedding=list(row["embedding"]) if row["embedding"] is not None else [],
        collection=row["collection"],
        metadata=dict(row["chunk_metadata"] or {}),
        script=row["script"],
    )


def _hit_columns(with_embeddings: bool) -> str:
    """The select list ``_hit`` reads (chunk ``c`` joined to its document
    ``d``). Without embeddings the embedding column is ``NULL::vector``: the
    stored vector is neither sent by PostgreSQL nor decoded here (issue 27:
    about 0.6 ms of decoding and 120 KB sent a query), and the hits'
    embedding is empty. A constant: no caller text goes into it."""
    embedding = "c.embedding" if with_embeddings else "NULL::vector AS embedding"
    return (f"c.id, c.document_id, d.title, c.heading_path, c.text, c.ordinal, {embedding}, d.collection,"
            " d.metadata || c.metadata AS chunk_metadata, d.script")


# ----------------------------------------------------------------- store


def scoped_ef_search(ef_search: int, top_k: int, share: float) -> int:
    """hnsw.ef_search for a search of ``top_k`` in a scope holding ``share``
    (0-1] of the chunks: a scope holding a share s needs about top_k / s
    index candidates before top_k of them are in it, so the iterative scan
    starts with that many; never below ``ef_search`` or ``top_k``, never
    above pgvector's 1000. bench/scale_million.py, 205k chunks, a 10% scope:
    recall@10 0.888 -> 0.940 (ef 64 -> 196), p50 9.4 -> 12.0 ms."""
    wanted = math.ceil(top_k / max(share, 1e-6))
    return int(min(max(ef_search, top_k, wanted), _MAX_EF_SEARCH))


async def _embedding_typmod(conn: asyncpg.Connection) -> int | None:
    """The dimension chunks.embedding was created with (None: no such column)."""
    return await conn.fetchval(
        "SELECT a.atttypmod FROM pg_attribute a "
        "WHERE a.attrelid = to_regclass('chunks') AND a.attname = 'embedding' "
        "AND NOT a.attisdropped"
    )


async def build_missing_vector_index(dsn: str) -> bool:
    """Builds the HNSW index of a store that has none, with the dimension
    its chunks were stored with: a backup taken during an initial load, or
    after a bulk load died, holds no index (``graphmesh backup restore``).

    Returns:
        True when it was built; False when it was there or the database
        holds no chunks table.

    Raises:
        OSError / asyncpg.PostgresError: the server cannot be reached or the
            build failed.
    """
    conn = await asyncpg.connect(dsn)
    try:
        dim = await _embedding_typmod(conn)
    finally:
        await conn.close()
    if dim is None or dim < 1:
        return False
    async with PgStore(dsn, int(dim), pool_min=0, pool_max=1, initial_load_quiet_s=0) as store:
        return await store.ensure_vector_index()


def index_build_mem_mb(rows: int, dim: int, cap_mb: int) -> int:
    """maintenance_work_mem (MiB) for an HNSW build over ``rows`` vectors of
    ``dim`` float32 dimensions: the graph's size (vector plus
    _HNSW_ROW_BYTES_BEYOND_VECTOR a row) with a quarter of headroom, at least
    _INDEX_BUILD_MEM_MIN_MB and at most ``cap_mb``. 26,424 chunks of 384-d: 81;
    one million: 3,052."""
    need = rows * (4 * dim + _HNSW_ROW_BYTES_BEYOND_VECTOR) * 1.25 / 2**20
    return int(min(cap_mb, max(_INDEX_BUILD_MEM_MIN_MB, math.ceil(need))))


class PgStore:
    """Chunk store on PostgreSQL + pgvector.

    Args:
        dsn: asyncpg DSN, e.g. ``postgresql://user:pw@host:5432/db`` or, for
            the embedded server, ``postgresql://postgres@/postgres?host=/sock/dir``.
        embedding_dim: dimension of stored and query embeddings (1..2000).
        ef_search: HNSW candidate list size per query (raised to top_k when
            smaller, capped at 1000).
        pool_min / pool_max: asyncpg pool size (connections).
        bm25_k1 / bm25_b: Okapi BM25 parameters (k1 >= 0, 0 <= b <= 1).
        budget: how long a statement may run (the RPC's remaining
            deadline, read ceiling); default ``QueryBudget()`` (30 s reads).
        connect_timeout: seconds to open one new connection (asyncpg's
            default is 60 s: a server that is down would hold a request).
        max_inactive_connection_lifetime: seconds an idle pooled connection
            is kept; older ones are closed, so few dead ones are left after
            a server restart.
        index_build_mem_max_mb: ceiling of an HNSW build's memory (MiB).
        keyword_cache_mb: MiB of keyword postings kept in memory for the
            keyword channels (``keyword_cache``); 0 scores every keyword
            query in SQL.
        initial_load_quiet_s: seconds without an ingest that end an initial
            load (an ingest into a store of fewer than 2,000 chunks drops
            the HNSW index; it is built when the load ends; vector search
            is exact meanwhile); 0 keeps the index row by row always.

    Raises:
        ValueError: a parameter out of range.

    Use ``await open()`` then ``await migrate()`` before anything else;
    ``await close()`` at the end (or ``async with PgStore(...) as store``,
    which opens and closes but does not migrate).
    """

    def __init__(
        self,
        dsn: str,
        embedding_dim: int,
        *,
        ef_search: int = 64,
        pool_min: int = 1,
        pool_max: int = 8,
        bm25_k1: float = 1.2,
        bm25_b: float = 0.75,
        budget: QueryBudget | None = None,
        connect_timeout: float = 2.0,
        max_inactive_connection_lifetime: float = 60.0,
        index_build_mem_max_mb: int = 4096,
        keyword_cache_mb: int = 256,
        initial_load_quiet_s: float = 10.0,
    ) -> None:
        if not isinstance(embedding_dim, int) or not 1 <= embedding_dim <= _MAX_HNSW_DIM:
            raise ValueError(f"embedding_dim must be an int in 1..{_MAX_HNSW_DIM}, got {embedding_dim!r}")
        if not 1 <= ef_search <= _MAX_EF_SEARCH:
            raise ValueError(f"ef_search must be in 1..{_MAX_EF_SEARCH}, got {ef_search}")
        if pool_min < 0 or pool_max < 1 or pool_min > pool_max:
            raise ValueError(f"invalid pool size min={pool_min} max={pool_max}")
        if bm25_k1 < 0 or not 0 <= bm25_b <= 1:
            raise ValueError(f"invalid BM25 parameters k1={bm25_k1} b={bm25_b}")
        self._dsn = dsn
        self.embedding_dim = embedding_dim
        self.ef_search = ef_search
        self._pool_min = pool_min
        self._pool_max = pool_max
        self.bm25_k1 = float(bm25_k1)
        self.bm25_b = float(bm25_b)
        self.budget = budget or QueryBudget()
        self._connect_timeout = connect_timeout
        self._max_inactive = max_inactive_connection_lifetime
        if index_build_mem_max_mb < _INDEX_BUILD_MEM_MIN_MB:
            raise ValueError(f"index_build_mem_max_mb must be >= {_INDEX_BUILD_MEM_MIN_MB}, got {index_build_mem_max_mb}")
        self.index_build_mem_max_mb = index_build_mem_max_mb
        if keyword_cache_mb < 0:
            raise ValueError(f"keyword_cache_mb must be >= 0, got {keyword_cache_mb}")
        self.keyword_cache = KeywordCache(keyword_cache_mb * 2**20, ttl_s=_STATS_TTL_S) if keyword_cache_mb else None
        self._pool: asyncpg.Pool | None = None
        self._stats: tuple[int, float] | None = None  # (N chunks, average doc_len)
        self._collection_stats: dict[str, tuple[int, int]] = {}  # collection -> (chunks, their terms in all)
        self._stats_at = 0.0
        self._scripts: dict[str, set[str]] | None = None  # collection -> writing systems of its documents
        self._scripts_at = 0.0
        # collections searched -> (when read, seconds the read took, {writing system: mean chunk embedding},
        # {writing system: chunks averaged})
        self._centroids: dict[tuple[str, ...] | None, tuple[float, float, dict[str, np.ndarray], dict[str, int]]] = {}
        if initial_load_quiet_s < 0:
            raise ValueError(f"initial_load_quiet_s must be >= 0, got {initial_load_quiet_s}")
        self.initial_load_quiet_s = float(initial_load_quiet_s)
        self._bulk_depth = 0
        self._bulk_lock = asyncio.Lock()
        self._initial_load: asyncio.Task | None = None
        self._ingests_in_flight = 0
        self._last_ingest_at = 0.0
        self._longest_pause = 0.0
        self._scope_sizes: OrderedDict[tuple, tuple[tuple[float, float], float]] = OrderedDict()

    # ------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Creates the connection pool (no-op when already open).

        Raises:
            OSError: the server cannot be reached.
            asyncpg.PostgresError: authentication failed, database missing, ...
        """
        if self._pool is not None:
            return
        self._pool = await asyncpg.create_pool(
            self._dsn,
            min_size=self._pool_min,
            max_size=self._pool_max,
            init=_register_codecs,
            timeout=self._connect_timeout,
            max_inactive_connection_lifetime=self._max_inactive,
        )

    async def close(self) -> None:
        """Closes the pool, waiting for borrowed connections to be released.
        No-op when not open. An initial load still open is left without
        its HNSW index: the next :meth:`migrate` builds it."""
        load, self._initial_load = self._initial_load, None
        if load is not None:
            load.cancel()
            await asyncio.gather(load, return_exceptions=True)
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def __aenter__(self) -> "PgStore":
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _acquire(self, seconds: float | None) -> asyncpg.Connection:
        """A pooled connection whose statements may run ``seconds`` each
        (None = the server's default). Waits at most ``seconds`` for a free
        connection. A connection found dead when its statement_timeout is
        set is dropped with the rest of the pool's (they died with the same
        server) and one fresh connection is tried.

        A caller cancelled while the timeout is set gives the connection
        back before the cancellation goes on.

        Raises:
            StoreTimeout: no connection was free within ``seconds``.
            OSError / asyncpg.PostgresConnectionError: the server cannot be
                reached (a fresh connection failed too).
        """
        assert self._pool is not None
        for attempt in (1, 2):
            try:
                conn = await self._pool.acquire(timeout=seconds)
            except asyncio.TimeoutError as err:
                raise StoreTimeout("PostgreSQL", seconds, "no pooled connection was free in time") from err
            if seconds is None:
                return conn
            try:
                # An int formatted by us: nothing to bind (SET takes no parameters).
                await conn.execute(f"SET statement_timeout = {milliseconds(seconds)}")
                return conn
            except _CONNECTION_ERRORS as err:
                await self._pool.release(conn)
                if attempt == 2:
                    raise
                _log.info("a pooled PostgreSQL connection was dead (%s); reconnecting", type(err).__name__)
                await self._pool.expire_connections()
            except BaseException:
                # Cancelled here (the caller's deadline passed mid-SET) or any
                # other failure: the connection is not the caller's yet, so it
                # goes back now, or the pool loses it for good.
                await self._pool.release(conn)
                raise
        raise AssertionError("unreachable")

    @asynccontextmanager
    async def _conn(self, write: bool = False) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection bounded by ``self.budget`` (reads: the RPC's
        remaining deadline, at most the read ceiling; ``write``: the
        deadline only). A statement PostgreSQL cancels for running past it
        raises StoreTimeout.

        Raises:
            RuntimeError: not open. StoreTimeout: out of time.
        """
        if self._pool is None:
            raise RuntimeError("PgStore is not open; call await store.open() first")
        seconds = self.budget.seconds(write)
        conn = await self._acquire(seconds)
        try:
            yield conn
        except asyncpg.QueryCanceledError as err:
            if seconds is not None and "statement timeout" in str(err):
                raise StoreTimeout("PostgreSQL", seconds, str(err)) from err
            raise
        finally:
            await self._pool.release(conn)

    def connection(self, write: bool = False) -> AsyncContextManager[asyncpg.Connection]:
        """A pooled connection with the vector and jsonb codecs, for the
        other stores of this database (``EntityCardStore``), bounded like
        the store's own (``_conn``).

        Raises:
            RuntimeError: not open (on entering). StoreTimeout: out of time.
        """
        return self._conn(write)

    # ------------------------------------------------------------ migrations

    async def _check_dimension(self, conn: asyncpg.Connection) -> None:
        typmod = await _embedding_typmod(conn)
        if typmod is not None and typmod != self.embedding_dim:
            raise ValueError(
                f"chunks.embedding in this database has dimension {typmod}, but the store "
                f"was configured with embedding_dim={self.embedding_dim}; use the embedding "
                f"model the corpus was ingested with, or a fresh database"
            )

    async def migrate(self) -> list[int]:
        """Applies pending schema migrations, idempotently.

        Runs in one transaction under a transaction-level advisory lock, so
        concurrent callers (several replicas starting at once) serialise and
        later ones find nothing to do. Creates the extensions vector and
        pg_trgm (needs the privilege to do so when they are missing).

        Returns:
            versions applied by this call (empty when up to date).

        Raises:
            ValueError: the existing chunks.embedding dimension differs from
                embedding_dim (nothing is changed).
            RuntimeError: the store is not open.
            asyncpg.PostgresError: DDL failed (e.g. extension not available,
                insufficient privilege); the transaction is rolled back.
        """
        applied_now: list[int] = []
        async with self._conn(write=True) as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1::bigint)", _MIGRATION_LOCK_KEY)
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " version int PRIMARY KEY,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                )
                done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
                await self._check_dimension(conn)
                for version, statements in _migrations(self.embedding_dim):
                    if version in done:
                        continue
                    for sql in statements:
                        await conn.execute(sql)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, now())", version
                    )
                    applied_now.append(version)
                await self._check_dimension(conn)
        if applied_now:
            _log.info("applied schema migrations %s", applied_now)
            # Connections opened before the extension existed lack the vector codec.
            assert self._pool is not None
            await self._pool.expire_connections()
        if self._bulk_depth == 0:
            # Rebuilds the HNSW index if a bulk load died before restoring it.
            await self.ensure_vector_index()
        await self.refresh_stats()
        return applied_now

    async def ensure_vector_index(self) -> bool:
        """Creates the HNSW index on chunks.embedding when it is missing
        (blocks writes to chunks while building). maintenance_work_mem is
        sized for the build by :func:`index_build_mem_mb` so the graph stays
        in memory (pgvector builds several times slower once it does not,
        and a parallel build allocates the whole amount as shared memory
        up front); a build that still outgrows it is logged as a warning.

        Returns:
            True when the index was built, False when it already existed.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: build failed.
        """
        notices: list[str] = []
        async with self._conn(write=True) as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1::bigint)", _MIGRATION_LOCK_KEY)
                if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", _HNSW_INDEX):
                    return False
                rows = int(await conn.fetchval("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL"))
                mem_mb = index_build_mem_mb(rows, self.embedding_dim, self.index_build_mem_max_mb)
                await conn.execute(f"SET LOCAL maintenance_work_mem = '{mem_mb}MB'")
                def listener(_conn, message) -> None:
                    notices.append(message.message)

                conn.add_log_listener(listener)
                try:
                    started = time.monotonic()
                    await conn.execute(_HNSW_INDEX_SQL)
                finally:
                    conn.remove_log_listener(listener)
        _log.info("built HNSW index over %d chunks in %.1f s (maintenance_work_mem %d MB)",
                  rows, time.monotonic() - started, mem_mb)
        for message in notices:
            if "maintenance_work_mem" in message:
                _log.warning("HNSW build: %s (maintenance_work_mem %d MB of a %d MB cap: raise "
                             "GRAPHMESH_RETRIEVER_PG_STORE__INDEX_BUILD_MEM_MAX_MB)", message, mem_mb,
                             self.index_build_mem_max_mb)
        return True

    @asynccontextmanager
    async def bulk_load(self) -> AsyncIterator["PgStore"]:
        """Context for loading many documents (e.g. a whole corpus in many
        ingest_documents calls): drops the HNSW index on entry and rebuilds
        it on exit (also on error), which is several times faster than
        maintaining it row by row. Vector search stays correct meanwhile
        (exact scan, slower). Nested uses, and uses inside an initial load,
        only act at the outermost level. ingest_documents enters it by
        itself for large calls.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: drop or rebuild failed.
        """
        await self._enter_bulk()
        try:
            yield self
        finally:
            await self._leave_bulk()

    async def _enter_bulk(self) -> None:
        async with self._bulk_lock:
            await self._enter_bulk_locked()

    async def _enter_bulk_locked(self) -> None:
        if self._bulk_depth == 0:
            async with self._conn(write=True) as conn:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock($1::bigint)", _MIGRATION_LOCK_KEY)
                    await conn.execute(f"DROP INDEX IF EXISTS {_HNSW_INDEX}")
        self._bulk_depth += 1

    async def _leave_bulk(self) -> None:
        self._bulk_depth -= 1
        if self._bulk_depth == 0:
            await self.ensure_vector_index()

    @property
    def initial_load_open(self) -> bool:
        """Whether an initial load is under way (the HNSW index is dropped
        until it ends; see ``initial_load_quiet_s``)."""
        return self._initial_load is not None

    def _ingest_started(self) -> None:
        now = time.monotonic()
        if self._initial_load is not None and self._ingests_in_flight == 0:
            self._longest_pause = max(self._longest_pause, now - self._last_ingest_at)
        self._ingests_in_flight += 1
        self._last_ingest_at = now

    def _ingest_finished(self) -> None:
        self._ingests_in_flight -= 1
        self._last_ingest_at = time.monotonic()

    async def _open_initial_load_if_empty(self) -> None:
        """Opens an initial load when the store holds fewer than
        _INITIAL_LOAD_MAX_CHUNKS chunks and none, nor a bulk load, is open."""
        if self._initial_load is not None or self._bulk_depth or not self.initial_load_quiet_s:
            return
        async with self._bulk_lock:
            if self._initial_load is not None or self._bulk_depth:
                return
            stored = self._stats[0] if self._stats is not None else (await self.refresh_stats())[0]
            if stored >= _INITIAL_LOAD_MAX_CHUNKS:
                return
            await self._enter_bulk_locked()
            self._longest_pause = 0.0
            self._initial_load = asyncio.create_task(self._end_initial_load_when_quiet())
        _log.info("initial load: HNSW index dropped until no ingest has come for %.0f s (up to three times the longest "
                  "pause between ingests, at most %.0f s)", self.initial_load_quiet_s,
                  max(self.initial_load_quiet_s, _INITIAL_LOAD_QUIET_MAX_S))

    def _initial_load_quiet_s(self) -> float:
        return min(max(self.initial_load_quiet_s, 3 * self._longest_pause),
                   max(self.initial_load_quiet_s, _INITIAL_LOAD_QUIET_MAX_S))

    async def _end_initial_load_when_quiet(self) -> None:
        # A background task: not bounded by the deadline of the ingest that opened the load (the task
        # copied that request's context, whose deadline has often passed by the time the load ends).
        with deadline_scope(None):
            await self._wait_quiet_then_build_index()

    async def _wait_quiet_then_build_index(self) -> None:
        try:
            while True:
                quiet = self._initial_load_quiet_s()
                left = self._last_ingest_at + quiet - time.monotonic()
                if self._ingests_in_flight == 0 and left <= 0:
                    break
                await asyncio.sleep(max(left, 0.05) if self._ingests_in_flight == 0 else quiet)
        except asyncio.CancelledError:
            self._bulk_depth -= 1  # closed mid-load: the next migrate builds the index
            raise
        try:
            await self._leave_bulk()
        except (asyncpg.PostgresError, OSError, StoreTimeout) as exc:
            # The next ingest, or the next migrate, builds it.
            _log.warning("initial load: building the HNSW index failed (%s)", exc)
        finally:
            self._initial_load = None

    # ------------------------------------------------------------ stats

    async def refresh_stats(self) -> tuple[int, float]:
        """Reloads the BM25 corpus statistics, per collection and of the
        whole store.

        Returns:
            (N, avgdl) of the whole store: number of chunks, mean chunk
            length in terms.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed
                (e.g. not migrated).
        """
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT d.collection, count(*) AS n, coalesce(sum(c.term_count), 0)::bigint AS terms"
                " FROM chunks c JOIN documents d ON d.id = c.document_id GROUP BY d.collection"
            )
        self._collection_stats = {r["collection"]: (int(r["n"]), int(r["terms"])) for r in rows}
        n = sum(chunks for chunks, _ in self._collection_stats.values())
        self._stats = (n, sum(terms for _, terms in self._collection_stats.values()) / n if n else 0.0)
        self._stats_at = time.monotonic()
        self._scripts = None  # the documents changed, or a minute passed: read again when next asked
        return self._stats

    async def collection_scripts(self, collections: Sequence[str] | None = None) -> set[str]:
        """The writing systems ("latin", "cjk"; "" for a document without
        letters) of the documents in ``collections`` (every collection when
        None), read once and then kept until this store writes or deletes
        documents, or for _STATS_TTL_S seconds (another replica's writes):
        what channel pg.translated asks before it runs.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        if self._scripts is None or time.monotonic() - self._scripts_at > _STATS_TTL_S:
            async with self._conn() as conn:
                rows = await conn.fetch("SELECT DISTINCT collection, script FROM documents")
            scripts: dict[str, set[str]] = {}
            for r in rows:
                scripts.setdefault(r["collection"], set()).add(r["script"])
            self._scripts, self._scripts_at = scripts, time.monotonic()
            # the documents changed (or a minute passed): centroids that were quick to read are read again
            self._centroids = {k: v for k, v in self._centroids.items() if v[1] >= _SLOW_CENTROIDS_S}
        wanted = self._scripts.keys() if collections is None else collections
        return {script for c in wanted for script in self._scripts.get(c, ())}

    async def script_centroids(self, collections: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """{writing system ("cjk", "latin"): the mean of the stored chunk
        embeddings of documents in that system} over ``collections`` (every
        collection when None); documents of no known system ("") are left
        out. One aggregate over the scope's chunks, read again when this
        store's documents change (as ``collection_scripts``), so that the
        same documents always rank the same; a scope whose aggregate took
        _SLOW_CENTROIDS_S or more (a scan of many chunk vectors) keeps its
        centroids for _STATS_TTL_S seconds instead, since a mean over many
        chunks moves little as a few are written, unless the scope now holds
        a writing system they lack (the first English files beside Chinese
        ones), when they are read again at once. A system of fewer than
        MIN_CENTROID_CHUNKS chunks has no centroid: the mean of one chunk is
        the chunk itself, which centring turns into a zero vector (a trial's
        one English note beside Chinese documents scored 0.0 in pg.centred
        and was quoted for nothing).

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        held = {s for s in await self.collection_scripts(collections) if s}
        key = tuple(sorted(set(collections))) if collections is not None else None
        read_at, _, centroids, counts = self._centroids.get(key, (0.0, 0.0, {}, {}))
        if time.monotonic() - read_at > _STATS_TTL_S or not held <= centroids.keys():
            started = time.monotonic()
            async with self._conn() as conn:
                rows = await conn.fetch(
                    "SELECT d.script, avg(c.embedding) AS mean, count(*) AS n FROM chunks c"
                    " JOIN documents d ON d.id = c.document_id WHERE c.embedding IS NOT NULL AND d.script <> ''"
                    " AND ($1::text[] IS NULL OR d.collection = ANY($1::text[])) GROUP BY d.script",
                    list(key) if key is not None else None)
            centroids = {r["script"]: np.asarray(r["mean"], dtype=np.float32) for r in rows}
            counts = {r["script"]: int(r["n"]) for r in rows}
            self._centroids[key] = (time.monotonic(), time.monotonic() - started, centroids, counts)
        return {s: v for s, v in centroids.items() if counts.get(s, 0) >= MIN_CENTROID_CHUNKS}

    async def _postings_changed(self) -> None:
        """After a write to chunk_terms committed: advances the postings
        generation once more. The trigger's own advance came before the
        commit, so a reader may have cached the old postings under it; this
        one makes every replica's keyword cache read them again."""
        async with self._conn(write=True) as conn:
            await conn.execute(f"SELECT nextval('{GENERATION_SEQUENCE}')")

    async def _corpus_stats(self, collections: Sequence[str] | None = None) -> tuple[int, float]:
        """(N, avgdl) of BM25 over ``collections`` (the whole store when
        None): a collection is scored as if it were alone, so what one
        user's documents score does not move with another collection's
        (a trial's BM25 score of one chunk went from 12.959 to 3.848 when an
        unrelated collection was deleted). Collections the cached statistics
        do not know yet (another replica's first ingest, within _STATS_TTL_S)
        are scored with the whole store's."""
        store = self._stats
        if store is None or time.monotonic() - self._stats_at > _STATS_TTL_S:
            store = await self.refresh_stats()
        if collections is None:
            return store
        known = [self._collection_stats[c] for c in set(collections) if c in self._collection_stats]
        n = sum(chunks for chunks, _ in known)
        return (n, sum(terms for _, terms in known) / n) if n else store

    # ------------------------------------------------------------ reads

    async def count_documents(self) -> int:
        """Number of stored documents.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        async with self._conn() as conn:
            return int(await conn.fetchval("SELECT count(*) FROM documents"))

    async def document_hashes(self, ids: list[str]) -> dict[str, str]:
        """Stored content hashes.

        Args:
            ids: document ids (duplicates allowed).

        Returns:
            {id: content_hash} for the ids that are stored; unknown ids (and
            strings PostgreSQL cannot hold: NUL, lone surrogates) are absent.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        wanted = [i for i in dict.fromkeys(ids) if storable_text(i)]
        if not wanted:
            return {}
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT id, content_hash FROM documents WHERE id = ANY($1::text[])", wanted
            )
        return {r["id"]: r["content_hash"] for r in rows}

    async def documents_by_text_digest(self, collection: str, digests: list[str]) -> dict[str, str]:
        """{digest: id of a stored document of ``collection`` with that text
        digest (the smallest id when several)} for the ``digests`` found.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        wanted = [d for d in dict.fromkeys(digests) if d and storable_text(d)]
        if not wanted:
            return {}
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT text_digest, min(id) AS id FROM documents WHERE collection = $1"
                " AND text_digest = ANY($2::text[]) GROUP BY text_digest", collection, wanted)
        return {r["text_digest"]: r["id"] for r in rows}

    async def documents_by_title(self, collection: str, titles: list[str], per_title: int = 5) -> list[tuple[str, str]]:
        """(title, id) of the stored documents of ``collection`` whose title is one of ``titles`` but for a
        year, quarter, version or date (``records.version_key``), at most ``per_title`` a title, by id: files
        stored under other names with the same title, as a revised version saved as a new file often is.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        keys = [k for k in dict.fromkeys(version_key(t) for t in titles if t and storable_text(t)) if k]
        if not keys:
            return []
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT title, id FROM (SELECT title, id, row_number() OVER (PARTITION BY key ORDER BY id) AS n FROM"
                " (SELECT title, id, regexp_replace(lower(title), $4, '', 'g') AS key FROM documents"
                "  WHERE collection = $1) d WHERE key = ANY($2::text[])) t WHERE n <= $3 ORDER BY title, id",
                collection, keys, per_title, VERSION_MARKS)
        return [(r["title"], r["id"]) for r in rows]

    async def list_documents(self, ids: Sequence[str], collections: Sequence[str] | None,
                             conditions: Sequence[Condition], page_size: int, after_id: str = "",
                             with_chunks: bool = False) -> list[StoredDocumentInfo]:
        """Stored documents ordered by id, with their chunks when asked
        (``lifecycle.list_documents``).

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        async with self._conn() as conn:
            return await lifecycle.list_documents(conn, [i for i in ids if storable_text(i)], collections, conditions,
                                                  page_size, after_id if storable_text(after_id) else "", with_chunks)

    async def delete_documents(self, ids: Sequence[str], collections: Sequence[str] | None,
                               conditions: Sequence[Condition]) -> Deletion:
        """Deletes documents by id or by scope with their chunks, vectors
        and postings in one transaction (``lifecycle.delete_documents``);
        BM25 corpus stats are refreshed afterwards.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: nothing deleted.
        """
        async with self._conn(write=True) as conn:
            deleted = await lifecycle.delete_documents(conn, [i for i in ids if storable_text(i)], collections, conditions)
            if collections:  # a collection left without documents forgets its pack
                await conn.execute("DELETE FROM collections c WHERE c.name = ANY($1::text[]) AND NOT EXISTS "
                                   "(SELECT 1 FROM documents d WHERE d.collection = c.name)", list(collections))
        if deleted.documents:
            await self._postings_changed()
            await self.refresh_stats()
        return deleted

    async def collection_counts(self) -> dict[str, tuple[int, int]]:
        """{collection: (documents, chunks)}."""
        async with self._conn() as conn:
            return await lifecycle.collection_counts(conn)

    async def collection_packs(self) -> dict[str, str]:
        """{collection: domain pack} of every recorded collection."""
        async with self._conn() as conn:
            return {r["name"]: r["domain_pack"] for r in await conn.fetch("SELECT name, domain_pack FROM collections")}

    @staticmethod
    async def _record_packs(conn: asyncpg.Connection, items: list[_Prepared]) -> None:
        """Records the pack of each new collection of ``items`` (the default
        pack when they name none); an existing collection keeps its own.

        Raises:
            ValueError: a document names another pack than its collection's.
        """
        wanted: dict[str, str] = {}
        for p in items:
            wanted.setdefault(p.collection, p.domain_pack)
        await conn.executemany("INSERT INTO collections (name, domain_pack) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                               [(c, p or domains.DEFAULT_PACK) for c, p in wanted.items()])
        rows = await conn.fetch("SELECT name, domain_pack FROM collections WHERE name = ANY($1::text[])", list(wanted))
        recorded = {r["name"]: r["domain_pack"] for r in rows}
        for collection, pack in wanted.items():
            if pack and recorded.get(collection) != pack:
                raise ValueError(f"collection {collection!r} uses the {recorded.get(collection)!r} domain pack, not {pack!r}")

    async def chunks_by_ids(self, ids: list[str]) -> list[Hit]:
        """Chunks by id, in the order of ``ids`` (first occurrence), unknown
        ids (and strings PostgreSQL cannot hold) skipped.

        Returns:
            Hits with channel "pg.lookup", score 0.0, stored embedding
            (empty when none).

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        wanted = [i for i in dict.fromkeys(ids) if storable_text(i)]
        if not wanted:
            return []
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {_hit_columns(True)} "
                "FROM unnest($1::text[]) WITH ORDINALITY AS u(id, pos) "
                "JOIN chunks c ON c.id = u.id JOIN documents d ON d.id = c.document_id "
                "ORDER BY u.pos",
                wanted,
            )
        return [_hit(r, "pg.lookup", 0.0) for r in rows]

    async def cosines(self, embedding: list[float], chunk_ids: Sequence[str]) -> dict[str, float]:
        """{chunk id: cosine similarity of its embedding to ``embedding``, in
        [-1, 1]} for the ``chunk_ids`` that exist and have an embedding.

        Raises:
            ValueError: wrong dimension, NaN/inf, or zero vector.
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        wanted = [i for i in dict.fromkeys(chunk_ids) if storable_text(i)]
        if not wanted:
            return {}
        query = _vector_bytes(embedding, self.embedding_dim, "query embedding")
        async with self._conn() as conn:
            rows = await conn.fetch("SELECT c.id, 1 - (c.embedding <=> $1::vector) AS score FROM chunks c "
                                    "WHERE c.id = ANY($2::text[]) AND c.embedding IS NOT NULL", query, wanted)
        return {r["id"]: float(r["score"]) for r in rows}

    async def vector_search(self, embedding: list[float], top_k: int, collections: Sequence[str] | None = None,
                            conditions: Sequence[Condition] = (), *, with_embeddings: bool = True,
                            script: str | None = None) -> list[Hit]:
        """Nearest chunks by cosine similarity among the chunks of
        ``collections`` (None = all) whose document meets ``conditions`` (and
        is written in ``script``, "latin" or "cjk", when given).
        A scope the planner estimates small (at most _EXACT_SCOPE_MAX_CHUNKS
        chunks and _EXACT_SCOPE_MAX_SHARE of the store) is scanned exactly.
        Otherwise the HNSW index answers (approximate), the scope applied
        during the index scan (pgvector iterative scan, strict order); when
        that still returns fewer than top_k hits the query is repeated as an
        exact scan, so a selective scope still gets top_k hits when that
        many exist. A scope holding a share s of the chunks starts the
        iterative scan with ef_search = top_k / s (at most 1000), so the
        first candidates already hold about top_k in scope. Each plan taken
        counts in graphmesh_pg_vector_search_total.

        Args:
            embedding: query embedding, length embedding_dim (need not be unit norm).
            top_k: number of hits wanted; <= 0 gives [].
            collections / conditions: the scope (``filter_sql.scope_sql``).
            with_embeddings: whether hits carry their stored embedding
                (False: empty, not read from the row).
            script: only chunks of documents written in this system.

        Returns:
            Up to top_k hits, most similar first; channel "pg.vector",
            score = cosine similarity in [-1, 1], evidence "cosine", stored
            embedding when ``with_embeddings``. Chunks without an embedding
            are never returned.

        Raises:
            ValueError: wrong dimension, NaN/inf, or zero vector.
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        if top_k <= 0:
            return []
        query = _vector_bytes(embedding, self.embedding_dim, "query embedding")
        params = Params(query, top_k)
        scope = scope_sql(collections, conditions, params)
        if script is not None:
            scope = f"{scope} AND d.script = {params.add(script)}::text"

        def nearest(order: str) -> str:
            return (
                "WITH nn AS MATERIALIZED ("
                "  SELECT c.id, c.embedding <=> $1::vector AS dist FROM chunks c JOIN documents d ON d.id = c.document_id"
                f"  WHERE c.embedding IS NOT NULL AND {scope}"
                f"  ORDER BY {order} LIMIT $2)"
                f" SELECT {_hit_columns(with_embeddings)}, 1 - nn.dist AS score"
                " FROM nn JOIN chunks c ON c.id = nn.id JOIN documents d ON d.id = c.document_id"
                " ORDER BY nn.dist, c.id"
            )

        # "+ 0" makes an ordering the HNSW index cannot serve: the planner
        # selects the scope through its B-tree indexes and sorts every
        # distance in it (exact).
        exact_sql, hnsw_sql = nearest("(c.embedding <=> $1::vector) + 0"), nearest("c.embedding <=> $1::vector")
        total = (await self._corpus_stats())[0] if scope != "TRUE" else 0
        async with self._conn() as conn:
            async with conn.transaction(readonly=True):
                estimate, share = ((await self._scope_size(conn, total, collections, conditions, self._scope_sizes))
                                   if scope != "TRUE" else (float(total), 1.0))
                if scope != "TRUE" and estimate <= _EXACT_SCOPE_MAX_CHUNKS and share <= _EXACT_SCOPE_MAX_SHARE:
                    plan, rows = "exact", await conn.fetch(exact_sql, *params.values)
                else:
                    ef = scoped_ef_search(self.ef_search, top_k, share)
                    await conn.execute("SELECT set_config('hnsw.ef_search', $1, true)", str(ef))
                    await conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
                    plan, rows = "hnsw", await conn.fetch(hnsw_sql, *params.values)
                    if len(rows) < top_k and scope != "TRUE":
                        # Too few passed the scope within the index scan's limits: exact scan.
                        plan, rows = "hnsw_then_exact", await conn.fetch(exact_sql, *params.values)
        VECTOR_SEARCH_PLANS.labels(plan).inc()
        return [_hit(r, "pg.vector", r["score"], "cosine") for r in rows]

    @staticmethod
    async def _scope_size(conn: asyncpg.Connection, total: int, collections: Sequence[str] | None,
                          conditions: Sequence[Condition], cache: OrderedDict) -> tuple[float, float]:
        """(chunks with embeddings the planner estimates in the scope, their
        share of ``total``), from one EXPLAIN (no execution); kept in
        ``cache`` for _STATS_TTL_S seconds, so the usual request's scope
        costs no extra round trip."""
        key = (None if collections is None else tuple(sorted(collections)), tuple(conditions), total)
        now = time.monotonic()
        if (known := cache.get(key)) is not None and now - known[1] <= _STATS_TTL_S:
            cache.move_to_end(key)
            return known[0]
        params = Params()
        scope = scope_sql(collections, conditions, params)
        plan = await conn.fetchval(
            "EXPLAIN (FORMAT JSON) SELECT 1 FROM chunks c JOIN documents d ON d.id = c.document_id"
            f" WHERE c.embedding IS NOT NULL AND {scope}", *params.values)
        estimate = float((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plan Rows"])
        size = (estimate, min(1.0, estimate / max(total, 1)))
        cache[key] = (size, now)
        while len(cache) > _SCOPE_CACHE_SIZE:
            cache.popitem(last=False)
        return size

    async def fulltext_search(self, terms: list[str], top_k: int, collections: Sequence[str] | None = None,
                              conditions: Sequence[Condition] = (), *, with_embeddings: bool = True) -> list[Hit]:
        """Chunks holding any of ``terms``, ordered by the number of distinct
        query terms they hold, then by length in terms (shorter first): the
        keyword ordering of MarxSphere's V47 keyword channel (the MarxSphere design (docs/references.md),
        stage 2: hit count, then length).

        Runs on the chunk_terms inverted index (the jieba terms, B-tree on
        term, covering chunk_id/tf/doc_len). A tsvector/GIN column over the
        same terms gave this ranking at 143 ms a law dev query against
        BM25's 24 ms on the same postings, so it was dropped.

        Only chunks in scope (``collections`` / ``conditions``) are counted.
        ``with_embeddings``: as in vector_search. Without conditions and with
        the keyword cache on, ranked in memory (``keyword_channels``).

        Returns:
            Up to top_k hits, channel "pg.fulltext", score = hit count,
            evidence = the matched terms.
        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        wanted = [t for t in dict.fromkeys(terms) if _usable_term(t)]
        if not wanted or top_k <= 0:
            return []
        if self.keyword_cache is not None and not conditions:
            return (await self.keyword_channels(wanted, top_k, collections, bm25=False,
                                                with_embeddings=with_embeddings))["pg.fulltext"]
        return await self._fulltext_search_sql(wanted, top_k, collections, conditions, with_embeddings=with_embeddings)

    async def _fulltext_search_sql(self, wanted: list[str], top_k: int, collections: Sequence[str] | None,
                                   conditions: Sequence[Condition], *, with_embeddings: bool) -> list[Hit]:
        """fulltext_search in SQL, for distinct usable ``wanted`` terms."""
        params = Params(wanted, top_k)
        scope = _term_scope(collections, conditions, params)
        async with self._conn() as conn:
            rows = await conn.fetch(
                # Length = the chunk's term count (doc_len, in the index).
                "WITH m AS MATERIALIZED ("
                "  SELECT ct.chunk_id, count(*) AS hits, min(ct.doc_len) AS len"
                f"  FROM chunk_terms ct {scope} AND ct.term = ANY($1::text[]) GROUP BY ct.chunk_id"
                "  ORDER BY hits DESC, len, ct.chunk_id LIMIT $2)"
                f" SELECT {_hit_columns(with_embeddings)}, m.hits,"
                "  ARRAY(SELECT t.term FROM chunk_terms t WHERE t.chunk_id = m.chunk_id"
                "        AND t.term = ANY($1::text[]) ORDER BY t.term) AS matched"
                " FROM m JOIN chunks c ON c.id = m.chunk_id JOIN documents d ON d.id = c.document_id"
                " ORDER BY m.hits DESC, m.len, c.id",
                *params.values,
            )
        return [_hit(r, "pg.fulltext", r["hits"], " ".join(r["matched"] or [])) for r in rows]

    async def trigram_search(self, text: str, top_k: int, collections: Sequence[str] | None = None,
                             conditions: Sequence[Condition] = (), *, with_embeddings: bool = True) -> list[Hit]:
        """Chunks containing ``text`` or close to it by trigram word
        similarity (pg_trgm), for queries too short or too unusual to
        segment, in scope (``collections`` / ``conditions``). ``text`` is
        bound as a parameter; LIKE wildcards in it are escaped.
        ``with_embeddings``: as in vector_search.

        Returns:
            Up to top_k hits, channel "pg.trigram", score = word_similarity in
            [0, 1] (1.0 for a literal substring), evidence "substring" or "trigram".
        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        if not text or not storable_text(text) or top_k <= 0:
            return []
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        params = Params(text, pattern, top_k)
        scope = scope_sql(collections, conditions, params)
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {_hit_columns(with_embeddings)},"
                " CASE WHEN c.text LIKE $2 THEN 1.0 ELSE word_similarity($1, c.text) END AS score"
                " FROM chunks c JOIN documents d ON d.id = c.document_id"
                f" WHERE (c.text LIKE $2 OR $1 <% c.text) AND {scope}"
                " ORDER BY score DESC, length(c.text), c.id LIMIT $3",
                *params.values,
            )
        return [_hit(r, "pg.trigram", r["score"], "substring" if r["score"] >= 1.0 else "trigram") for r in rows]

    async def neighbour_chunks(self, chunk_ids: list[str], window: int, limit: int, *,
                               with_embeddings: bool = True) -> list[Hit]:
        """Chunks of the same documents as ``chunk_ids`` within ``window``
        ordinals of them (the chunks themselves excluded), nearest first, at
        most ``limit`` (MarxSphere V88A same-document boost: "命中doc_id →
        注入同doc其他chunks LIMIT 10", the MarxSphere design (docs/references.md)).
        ``with_embeddings``: as in vector_search.

        Returns:
            Hits with channel "pg.boost", score = 1 / (1 + ordinal distance),
            evidence "same-document:<chunk id>".
        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        wanted = [i for i in dict.fromkeys(chunk_ids) if storable_text(i)]
        if not wanted or limit <= 0:
            return []
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT DISTINCT ON (c.id) {_hit_columns(with_embeddings)},"
                " s.id AS seed, abs(c.ordinal - s.ordinal) AS distance"
                " FROM chunks s JOIN chunks c ON c.document_id = s.document_id AND c.id <> s.id"
                " AND abs(c.ordinal - s.ordinal) <= $2"
                " JOIN documents d ON d.id = c.document_id"
                " WHERE s.id = ANY($1::text[]) AND NOT c.id = ANY($1::text[])"
                " ORDER BY c.id, distance",
                wanted,
                window,
            )
        rows = sorted(rows, key=lambda r: (r["distance"], r["id"]))[:limit]
        return [_hit(r, "pg.boost", 1.0 / (1 + r["distance"]), f"same-document:{r['seed']}") for r in rows]

    async def section_chunks(self, chunk_ids: list[str], window: int) -> dict[str, tuple[int, list[SectionChunk]]]:
        """For each of ``chunk_ids``, the chunks of its document under the same
        heading_path within ``window`` ordinals of it (itself included), for
        its parent context (``parent_context.parent_window``). One query,
        ids passed as a parameter; uses the (document_id, ordinal) index.

        Returns:
            chunk id -> (its ordinal, its section's chunks in reading order);
            unknown ids (and strings PostgreSQL cannot hold) are absent.
        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        wanted = [i for i in dict.fromkeys(chunk_ids) if storable_text(i)]
        if not wanted or window < 0:
            return {}
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT s.id AS seed, s.ordinal AS seed_ordinal, c.ordinal, c.text"
                " FROM chunks s JOIN chunks c ON c.document_id = s.document_id"
                " AND c.ordinal BETWEEN s.ordinal - $2 AND s.ordinal + $2 AND c.heading_path = s.heading_path"
                " WHERE s.id = ANY($1::text[])"
                " ORDER BY s.id, c.ordinal",
                wanted,
                window,
            )
        out: dict[str, tuple[int, list[SectionChunk]]] = {}
        for r in rows:
            out.setdefault(r["seed"], (r["seed_ordinal"], []))[1].append(SectionChunk(r["ordinal"], r["text"]))
        return out

    async def keyword_search(self, terms: list[str], top_k: int, collections: Sequence[str] | None = None,
                             conditions: Sequence[Condition] = (), *, with_embeddings: bool = True) -> list[Hit]:
        """Okapi BM25 over chunk terms.

        score(chunk) = sum over distinct query terms t in the chunk of
        idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl)),
        idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)); N = number of chunks,
        df = chunks containing t, doc_len = chunk length in terms, avgdl = mean
        doc_len (N and avgdl cached, refreshed after ingestion and every 60 s).

        Args:
            terms: query keywords (``text.query_keywords``); duplicates count
                once; terms that cannot be stored (empty, NUL, longer than
                MAX_TERM_CHARS, unencodable) are ignored. Passed as a bound
                text[] parameter, never formatted into SQL.
            top_k: number of hits wanted; <= 0 gives [].
            collections / conditions: the scope; only chunks in it are
                scored. N, df and avgdl are those of ``collections`` (of
                the whole store when None; metadata conditions filter, they
                do not change the statistics).
            with_embeddings: as in vector_search.

        Without conditions and with the keyword cache on, scored in memory
        over the cached postings (``keyword_channels``), with the same
        ranking.

        Returns:
            Up to top_k hits, highest BM25 first (ties by chunk id); channel
            "pg.keyword", score = BM25, evidence = matched query terms in
            query order joined by a space. [] when no term is usable.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        if top_k <= 0:
            return []
        wanted = [t for t in dict.fromkeys(terms) if _usable_term(t)]
        if not wanted:
            return []
        if self.keyword_cache is not None and not conditions:
            return (await self.keyword_channels(wanted, top_k, collections, fulltext=False,
                                                with_embeddings=with_embeddings))["pg.keyword"]
        return await self._keyword_search_sql(wanted, top_k, collections, conditions, with_embeddings=with_embeddings)

    async def _keyword_search_sql(self, wanted: list[str], top_k: int, collections: Sequence[str] | None,
                                  conditions: Sequence[Condition], *, with_embeddings: bool) -> list[Hit]:
        """keyword_search in SQL, for distinct usable ``wanted`` terms."""
        n, avgdl = await self._corpus_stats(collections)
        if n == 0 or avgdl <= 0:
            return []
        params = Params(wanted, float(n), self.bm25_k1, self.bm25_b, float(avgdl), top_k)
        scope = _term_scope(collections, conditions, params)
        df_scope = f" WHERE ct.collection = ANY({params.add(list(collections))}::text[])" if collections is not None else ""
        async with self._conn() as conn:
            rows = await conn.fetch(
                """
                WITH q AS (
                    SELECT u.term, u.pos FROM unnest($1::text[]) WITH ORDINALITY AS u(term, pos)
                ), df AS (
                    SELECT q.term,
                           -- N never below df (cached N may lag other writers)
                           ln(1 + (greatest($2::float8, count(*)::float8) - count(*)::float8 + 0.5)
                                  / (count(*)::float8 + 0.5)) AS idf
                    FROM q JOIN chunk_terms ct ON ct.term = q.term""" + df_scope + """
                    GROUP BY q.term
                ), scored AS (
                    SELECT ct.chunk_id,
                           sum(df.idf * ct.tf * ($3::float8 + 1)
                               / (ct.tf + $3::float8 * (1 - $4::float8
                                                        + $4::float8 * ct.doc_len / $5::float8))
                           ) AS score
                    FROM df JOIN chunk_terms ct ON ct.term = df.term""" + scope + """
                    GROUP BY ct.chunk_id
                    ORDER BY score DESC, ct.chunk_id
                    LIMIT $6
                )
                SELECT """ + _hit_columns(with_embeddings) + """, s.score,
                       ARRAY(SELECT q.term FROM q
                             JOIN chunk_terms m ON m.chunk_id = s.chunk_id AND m.term = q.term
                             ORDER BY q.pos) AS matched
                FROM scored s JOIN chunks c ON c.id = s.chunk_id
                JOIN documents d ON d.id = c.document_id
                ORDER BY s.score DESC, c.id
                """,
                *params.values,
            )
        return [_hit(r, "pg.keyword", r["score"], " ".join(r["matched"])) for r in rows]

    async def keyword_channels(self, terms: list[str], top_k: int, collections: Sequence[str] | None = None,
                               conditions: Sequence[Condition] = (), *, bm25: bool = True, fulltext: bool = True,
                               with_embeddings: bool = True) -> dict[str, list[Hit]]:
        """``pg.keyword`` (BM25) and ``pg.fulltext`` (hit count) from one read
        of the postings: the posting lists come from the keyword cache (read
        from ``chunk_terms`` when not cached), are ranked in memory
        (``keyword_index``), and one statement reads the hits' chunks.
        Rankings, scores and evidence are those of ``keyword_search`` and
        ``fulltext_search`` in SQL, which answer instead when the cache is
        off or ``conditions`` are given.

        Args:
            terms / top_k / collections / conditions / with_embeddings: as
                in keyword_search.
            bm25 / fulltext: which channels to rank.

        Returns:
            {"pg.keyword": hits, "pg.fulltext": hits} for the channels asked.

        Raises:
            RuntimeError: not open. asyncpg.PostgresError: query failed.
        """
        wanted = [t for t in dict.fromkeys(terms) if _usable_term(t)]
        asked = [c for c, on in (("pg.keyword", bm25), ("pg.fulltext", fulltext)) if on]
        if not wanted or top_k <= 0:
            return {c: [] for c in asked}
        if self.keyword_cache is None or conditions:
            sql = {"pg.keyword": self._keyword_search_sql, "pg.fulltext": self._fulltext_search_sql}
            found = await asyncio.gather(*(sql[c](wanted, top_k, collections, conditions,
                                                  with_embeddings=with_embeddings) for c in asked))
            return dict(zip(asked, found))
        n, avgdl = await self._corpus_stats(collections) if bm25 else (0, 0.0)
        async with self._conn() as conn:
            table, postings = await self.keyword_cache.lookup(conn, wanted)
            ranked: dict[str, list[keyword_index.KeywordHit]] = {}
            if bm25:
                ranked["pg.keyword"] = (keyword_index.bm25(table, postings, wanted, top_k, collections, n=n, avgdl=avgdl,
                                                           k1=self.bm25_k1, b=self.bm25_b)
                                        if n > 0 and avgdl > 0 else [])
            if fulltext:
                ranked["pg.fulltext"] = keyword_index.hit_count(table, postings, wanted, top_k, collections)
            ids = list(dict.fromkeys(h.chunk_id for hits in ranked.values() for h in hits))
            rows = await conn.fetch(
                f"SELECT {_hit_columns(with_embeddings)} FROM chunks c JOIN documents d ON d.id = c.document_id"
                " WHERE c.id = ANY($1::text[])", ids) if ids else []
        by_id = {r["id"]: r for r in rows}
        # A chunk deleted since its postings were read is left out.
        return {channel: [_hit(by_id[h.chunk_id], channel, h.score, " ".join(h.matched))
                          for h in hits if h.chunk_id in by_id]
                for channel, hits in ranked.items()}

    # ------------------------------------------------------------ writes

    async def ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult:
        """Stores documents with their chunks and keyword postings.

        Per document, atomically: a stored document with the same id and
        content_hash is left alone (counted ``unchanged``); otherwise its old
        document, chunk and term rows are deleted and the new ones written
        (counted ``stored``). Documents are written in batches with COPY; when
        a batch fails it is retried one document per transaction, so a bad
        document is reported and leaves nothing behind while the others are
        stored. Chunk embeddings may be empty (stored as NULL). chunk_terms
        gets one row per distinct usable term with tf = its count and
        doc_len = len(chunk.terms). Corpus stats for BM25 are refreshed
        afterwards. A call into a store of fewer than 2,000 chunks opens an
        initial load (the HNSW index is built once no ingest has come for
        ``initial_load_quiet_s``); a call bringing >= 2000 chunks and at
        least as many as are stored runs inside :meth:`bulk_load` (HNSW
        index rebuilt at the end); any other call rebuilds the index when it
        is missing (a bulk load whose rebuild failed).

        Args:
            docs: documents to store; an id repeated in the list is a failure
                for every occurrence after the first.

        Returns:
            IngestResult(stored, unchanged, failures); failures carry the
            document's index in ``docs``, its id and the reason, sorted by index.

        Raises:
            RuntimeError: not open.
            asyncpg.InterfaceError: the connection was lost (documents of
                earlier, committed batches stay stored).
        """
        self._ingest_started()
        try:
            if docs:
                await self._open_initial_load_if_empty()
            return await self._ingest_documents(docs)
        finally:
            self._ingest_finished()

    async def _ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult:
        incoming = sum(len(getattr(d, "chunks", None) or ()) for d in docs)
        if self._bulk_depth == 0 and incoming >= _BULK_MIN_CHUNKS:
            async with self._conn() as conn:
                stored_chunks = int(await conn.fetchval("SELECT count(*) FROM chunks"))
            if incoming >= stored_chunks:
                async with self.bulk_load():
                    return await self._ingest_documents(docs)
        result = IngestResult()
        first_seen: dict[str, int] = {}
        batch: list[_Prepared] = []
        batch_chunks = 0
        async with self._conn(write=True) as conn:
            for index, doc in enumerate(docs):
                doc_id = getattr(doc, "id", "")
                if isinstance(doc_id, str) and doc_id in first_seen:
                    result.failures.append(IngestFailureRecord(
                        index, doc_id, f"duplicate document id in this batch (first at index {first_seen[doc_id]})"))
                    continue
                try:
                    prepared = _prepare(index, doc, self.embedding_dim)
                except (ValueError, TypeError, AttributeError) as exc:
                    result.failures.append(IngestFailureRecord(index, str(doc_id), str(exc)))
                    continue
                first_seen[prepared.id] = index
                batch.append(prepared)
                batch_chunks += len(prepared.chunk_rows)
                if len(batch) >= _BATCH_DOCS or batch_chunks >= _BATCH_CHUNKS:
                    await self._write_with_fallback(conn, batch, result)
                    batch, batch_chunks = [], 0
            if batch:
                await self._write_with_fallback(conn, batch, result)
        result.failures.sort(key=lambda f: f.index)
        if result.stored:
            await self._postings_changed()
            await self.refresh_stats()
        if self._bulk_depth == 0 and not await self._vector_index_exists():
            # A bulk load whose rebuild failed (PostgreSQL died mid-load, here
            # or in another replica) left chunks without the HNSW index; a
            # later ingest too small for the bulk path restores it (crash
            # trials, issue 16).
            await self.ensure_vector_index()
        return result

    async def _vector_index_exists(self) -> bool:
        async with self._conn() as conn:
            return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", _HNSW_INDEX))

    async def _write_with_fallback(
        self, conn: asyncpg.Connection, batch: list[_Prepared], result: IngestResult
    ) -> None:
        try:
            stored, unchanged, conflicts = await self._write(conn, batch)
        except _WRITE_ERRORS as exc:
            if len(batch) == 1:
                result.failures.append(IngestFailureRecord(batch[0].index, batch[0].id, _reason(exc)))
                return
            _log.info("batch of %d documents failed (%s); retrying one by one", len(batch), exc)
            for item in batch:
                await self._write_with_fallback(conn, [item], result)
            return
        result.stored += stored
        result.unchanged += unchanged
        result.failures.extend(conflicts)

    async def _write(self, conn: asyncpg.Connection, items: list[_Prepared]) -> tuple[int, int, list[IngestFailureRecord]]:
        """One transaction for ``items``. Returns (stored, unchanged,
        failures): a document whose id is stored in another collection is
        not written (ids are unique across collections; delete it there
        first)."""
        ids = [p.id for p in items]
        async with conn.transaction():
            # Serialise concurrent writers of the same documents (sorted: no deadlock).
            await conn.execute(
                "SELECT pg_advisory_xact_lock(k) FROM ("
                " SELECT DISTINCT hashtextextended(u.id, $2) AS k FROM unnest($1::text[]) AS u(id)"
                " ORDER BY k) s",
                ids,
                _DOC_LOCK_SEED,
            )
            rows = await conn.fetch("SELECT id, content_hash, collection FROM documents WHERE id = ANY($1::text[])", ids)
            existing = {r["id"]: r["content_hash"] for r in rows}
            elsewhere = {r["id"]: r["collection"] for r in rows}
            conflicts = [
                IngestFailureRecord(p.index, p.id, f"document id {p.id!r} is stored in collection {elsewhere[p.id]!r}; "
                                                   "delete it there first or give another id "
                                                   "(the record's own id; for files, graphmesh ingest files --id-prefix)")
                for p in items if p.id in elsewhere and elsewhere[p.id] != p.collection
            ]
            clash = {f.id for f in conflicts}
            items = [p for p in items if p.id not in clash]
            if items:  # a collection is recorded by its first stored document, not by an ingest that stored none
                await self._record_packs(conn, items)
            todo = [p for p in items if existing.get(p.id) != p.content_hash]
            replaced = [p.id for p in todo if p.id in existing]
            if replaced:
                await conn.execute(
                    "DELETE FROM chunk_terms WHERE chunk_id IN "
                    "(SELECT id FROM chunks WHERE document_id = ANY($1::text[]))",
                    replaced,
                )
                await conn.execute("DELETE FROM chunks WHERE document_id = ANY($1::text[])", replaced)
                await conn.execute("DELETE FROM documents WHERE id = ANY($1::text[])", replaced)
            if todo:
                await conn.copy_records_to_table(
                    "documents", records=[p.doc_row for p in todo], columns=_DOC_COLUMNS
                )
                chunk_rows = _flatten(p.chunk_rows for p in todo)
                if chunk_rows:
                    await conn.copy_records_to_table("chunks", records=chunk_rows, columns=_CHUNK_COLUMNS)
                term_rows = _flatten(p.term_rows for p in todo)
                if term_rows:
                    await conn.copy_records_to_table("chunk_terms", records=term_rows, columns=_TERM_COLUMNS)
        return len(todo), len(items) - len(todo), conflicts


def _flatten(parts: Iterable[list[tuple]]) -> list[tuple]:
    out: list[tuple] = []
    for part in parts:
        out.extend(part)
    return out


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}"
