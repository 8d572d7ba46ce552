"""Document lifecycle in PostgreSQL: list, delete and count by collection.

Pure functions over an asyncpg connection (the stores pass a pooled one);
the scope SQL comes from ``filter_sql`` with every value bound. Deletion
runs in one transaction: the documents are locked (the same advisory locks
ingestion takes, so a concurrent re-ingest of one of them waits), then their
keyword postings, chunks (with their embeddings) and rows go; what was
removed is counted. Nothing else in this database depends only on a
document (entity cards belong to collections, not documents).
"""
from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from services.common.filters import Condition
from services.common.records import ChunkRecord, Deletion, StoredDocumentInfo
from services.retriever_pg.filter_sql import Params, scope_sql

#: Seed of the per-document advisory locks (the one ingestion uses).
DOC_LOCK_SEED = 0x4744_4F43  # "GDOC"


def _where(ids: Sequence[str], collections: Sequence[str] | None, conditions: Sequence[Condition], params: Params) -> str:
    """Documents of ``ids`` (when given) in scope (collections: None = any)."""
    scope = scope_sql(collections, conditions, params)
    if ids:
        return f"d.id = ANY({params.add(list(ids))}::text[]) AND {scope}"
    return scope


async def list_documents(conn: asyncpg.Connection, ids: Sequence[str], collections: Sequence[str] | None,
                         conditions: Sequence[Condition], page_size: int, after_id: str,
                         with_chunks: bool = False) -> list[StoredDocumentInfo]:
    """Stored documents ordered by id: those of ``ids`` when given, else
    those of ``collections`` (None = all) meeting ``conditions``; only ids
    after ``after_id``; at most ``page_size``; ``with_chunks``: each with
    its chunks in reading order.

    Raises:
        asyncpg.PostgresError: the query failed.
    """
    params = Params()
    where = _where(ids, collections, conditions, params)
    rows = await conn.fetch(
        "SELECT d.id, d.collection, d.title, d.source, d.heading_path, d.metadata, d.content_hash,"
        " (SELECT count(*) FROM chunks c WHERE c.document_id = d.id) AS chunk_count,"
        " (extract(epoch FROM d.ingested_at) * 1000)::bigint AS update_ms"
        f" FROM documents d WHERE {where} AND d.id > {params.add(after_id)}::text"
        f" ORDER BY d.id LIMIT {params.add(page_size)}::int",
        *params.values,
    )
    listed = [
        StoredDocumentInfo(
            id=r["id"], collection=r["collection"], title=r["title"], source=r["source"],
            heading_path=list(r["heading_path"] or []), metadata=dict(r["metadata"] or {}),
            content_hash=r["content_hash"], chunk_count=int(r["chunk_count"]), update_time_ms=int(r["update_ms"] or 0),
        )
        for r in rows
    ]
    if with_chunks and listed:
        by_id = {d.id: d for d in listed}
        for r in await conn.fetch("SELECT id, document_id, ordinal, heading_path, text, metadata FROM chunks"
                                  " WHERE document_id = ANY($1::text[]) ORDER BY document_id, ordinal", list(by_id)):
            by_id[r["document_id"]].chunks.append(ChunkRecord(
                id=r["id"], document_id=r["document_id"], ordinal=r["ordinal"], heading_path=list(r["heading_path"] or []),
                text=r["text"], metadata={k: str(v) for k, v in (r["metadata"] or {}).items()}))
    return listed


def _count(status: str) -> int:
    """Rows of a command status such as "DELETE 12"."""
    return int(status.rsplit(" ", 1)[-1]) if status and status[-1].isdigit() else 0


async def delete_documents(conn: asyncpg.Connection, ids: Sequence[str], collections: Sequence[str] | None,
                           conditions: Sequence[Condition]) -> Deletion:
    """Deletes the documents of ``ids`` (or in scope) with their chunks,
    embeddings and postings, in one transaction. Unknown ids are ignored.

    Returns:
        Deletion: documents, chunks, vectors (chunks that had an
        embedding), postings (chunk_terms rows) and the ids removed.
    Raises:
        asyncpg.PostgresError: the transaction failed (nothing is removed).
    """
    params = Params()
    where = _where(ids, collections, conditions, params)
    async with conn.transaction():
        found = [r["id"] for r in await conn.fetch(f"SELECT d.id FROM documents d WHERE {where} ORDER BY d.id", *params.values)]
        if not found:
            return Deletion()
        await conn.execute(
            "SELECT pg_advisory_xact_lock(k) FROM ("
            " SELECT DISTINCT hashtextextended(u.id, $2) AS k FROM unnest($1::text[]) AS u(id) ORDER BY k) s",
            found, DOC_LOCK_SEED)
        found = [r["id"] for r in await conn.fetch(
            "SELECT id FROM documents WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE", found)]
        counts = await conn.fetchrow(
            "SELECT count(*) AS chunks, count(embedding) AS vectors FROM chunks WHERE document_id = ANY($1::text[])", found)
        postings = _count(await conn.execute(
            "DELETE FROM chunk_terms WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ANY($1::text[]))", found))
        chunks = _count(await conn.execute("DELETE FROM chunks WHERE document_id = ANY($1::text[])", found))
        documents = _count(await conn.execute("DELETE FROM documents WHERE id = ANY($1::text[])", found))
    return Deletion(documents=documents, chunks=chunks, vectors=int(counts["vectors"]), postings=postings,
                    document_ids=sorted(found))


async def collection_counts(conn: asyncpg.Connection) -> dict[str, tuple[int, int]]:
    """{collection: (documents, chunks)} of every collection holding documents."""
    docs = {r["collection"]: int(r["n"]) for r in await conn.fetch(
        "SELECT collection, count(*) AS n FROM documents GROUP BY collection")}
    chunks = {r["collection"]: int(r["n"]) for r in await conn.fetch(
        "SELECT d.collection, count(*) AS n FROM chunks c JOIN documents d ON d.id = c.document_id GROUP BY d.collection")}
    return {name: (n, chunks.get(name, 0)) for name, n in sorted(docs.items())}
