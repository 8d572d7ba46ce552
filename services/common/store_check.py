"""What an ingest should have left in both stores, checked by querying the
stores directly (used by bench/crash_trials.py, ``graphmesh backup restore``
and their tests).

``expected_documents(lines)`` chunks JSONL document records the way the
gateway does (last record of an id wins); ``expected_from_postgres(dsn)``
reads the same from a PostgreSQL store (after a restore, Neo4j is checked
against it). ``check_stores(dsn, neo4j_uri, expected)`` compares PostgreSQL
and Neo4j against them and returns every problem found, as text ([] =
exactly the expected state):

- PostgreSQL: the set of document ids and their content hashes; per document
  exactly the expected chunk ids (no extra, missing or duplicated chunk, no
  chunk of a document that is not there); every chunk with an embedding of
  the stored dimension; keyword postings for every chunk that has terms, and
  none for a chunk that is not there, with doc_len equal to the chunk's
  term count; the HNSW index present (a bulk load that died drops it).
- Neo4j: Document nodes (one per id, hashes), per document exactly the
  expected Chunk nodes through HAS_CHUNK (each chunk once, under one
  document), NEXT edges chaining them in order and nothing else, no Chunk
  outside a Document, one parent Heading per document that has a heading
  path, no duplicated Heading id.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from services.common.filters import DEFAULT_COLLECTION
from services.ingest.chunking import ChunkingConfig, chunk_document
from services.ingest.jsonl_documents import parse_jsonl


@dataclass(frozen=True)
class ExpectedDocument:
    """One document as the stores should hold it."""

    id: str
    content_hash: str
    chunk_ids: tuple[str, ...]
    has_terms: frozenset[str]  # chunk ids with at least one keyword term
    has_parent: bool


def expected_documents(lines: list[str], config: ChunkingConfig = ChunkingConfig(),
                       collection: str = DEFAULT_COLLECTION) -> dict[str, ExpectedDocument]:
    """{document id: ExpectedDocument} for JSONL document ``lines`` ingested
    into ``collection`` (part of the content hash); records that cannot be
    read are ignored, as the gateway skips them."""
    docs, _ = parse_jsonl("\n".join(lines).encode("utf-8"))
    latest = {d.id: d for d in docs}
    out = {}
    for d in latest.values():
        rec = chunk_document(d.id, d.title, d.heading_path, d.text, d.metadata, config, collection)
        has_parent = bool([p for p in rec.heading_path if p and p.strip()][:-1]) or bool(rec.title.strip())
        out[d.id] = ExpectedDocument(d.id, rec.content_hash, tuple(c.id for c in rec.chunks),
                                     frozenset(c.id for c in rec.chunks if c.terms), has_parent)
    return out


async def expected_from_postgres(dsn: str) -> dict[str, ExpectedDocument]:
    """{document id: ExpectedDocument} of what PostgreSQL holds: documents,
    their chunk ids in ordinal order, the chunks with a term count > 0. The
    PostgreSQL checks then test the store's inner invariants (postings,
    vectors, index) and the Neo4j checks that the graph holds the same."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        docs = await conn.fetch("SELECT id, title, heading_path, content_hash FROM documents")
        chunks = await conn.fetch("SELECT id, document_id, term_count FROM chunks ORDER BY document_id, ordinal, id")
    finally:
        await conn.close()
    by_doc: dict[str, list] = {}
    for c in chunks:
        by_doc.setdefault(c["document_id"], []).append(c)
    out = {}
    for d in docs:
        rows = by_doc.get(d["id"], [])
        path = [p for p in (d["heading_path"] or []) if p and p.strip()]
        out[d["id"]] = ExpectedDocument(d["id"], d["content_hash"], tuple(c["id"] for c in rows),
                                        frozenset(c["id"] for c in rows if c["term_count"]),
                                        bool(path[:-1]) or bool((d["title"] or "").strip()))
    return out


async def check_postgres(dsn: str, expected: dict[str, ExpectedDocument]) -> list[str]:
    """Problems in PostgreSQL (see the module docstring)."""
    import asyncpg

    problems: list[str] = []
    conn = await asyncpg.connect(dsn)
    try:
        docs = {r["id"]: r["content_hash"] for r in await conn.fetch("SELECT id, content_hash FROM documents")}
        chunks = await conn.fetch(
            "SELECT id, document_id, ordinal, embedding IS NULL AS no_vector, term_count FROM chunks")
        postings = await conn.fetch(
            "SELECT p.chunk_id, count(*) AS n, bool_and(p.doc_len = c.term_count) AS lens_ok, "
            "bool_or(c.id IS NULL) AS orphan FROM chunk_terms p LEFT JOIN chunks c ON c.id = p.chunk_id "
            "GROUP BY p.chunk_id")
        index = await conn.fetchval("SELECT to_regclass('chunks_embedding_hnsw_idx') IS NOT NULL")
    finally:
        await conn.close()
    _compare_documents("pg", docs, expected, problems)
    by_doc: dict[str, list[str]] = {}
    for c in chunks:
        by_doc.setdefault(c["document_id"], []).append(c["id"])
        if c["no_vector"]:
            problems.append(f"pg: chunk {c['id']} has no embedding")
    _compare_chunks("pg", by_doc, expected, problems)
    posted = {p["chunk_id"]: p for p in postings}
    for p in postings:
        if p["orphan"]:
            problems.append(f"pg: postings of chunk {p['chunk_id']}, which is not stored")
        elif not p["lens_ok"]:
            problems.append(f"pg: postings of chunk {p['chunk_id']} disagree with its term count")
    for doc in expected.values():
        for cid in doc.has_terms:
            if cid not in posted and doc.id in docs:
                problems.append(f"pg: chunk {cid} has terms but no postings")
    if not index:
        problems.append("pg: HNSW index chunks_embedding_hnsw_idx is missing")
    return problems


async def check_neo4j(uri: str, expected: dict[str, ExpectedDocument], *, auth: tuple[str, str] | None = None,
                      database: str | None = None) -> list[str]:
    """Problems in Neo4j (see the module docstring); ``auth`` (user,
    password) when the server has authentication on, ``database`` its
    database (None: the server's default)."""
    from neo4j import AsyncGraphDatabase

    problems: list[str] = []
    driver = AsyncGraphDatabase.driver(uri, auth=auth)
    try:
        async def rows(query: str) -> list:
            records, _, _ = await driver.execute_query(query, database_=database)
            return records

        doc_rows = await rows("MATCH (d:Document) RETURN d.id AS id, d.content_hash AS hash")
        chunk_rows = await rows(
            "MATCH (c:Chunk) OPTIONAL MATCH (d:Document)-[:HAS_CHUNK]->(c) "
            "RETURN c.id AS id, c.document_id AS doc, collect(d.id) AS owners")
        next_rows = await rows(
            "MATCH (a:Chunk)-[r:NEXT]->(b:Chunk) RETURN a.id AS a, b.id AS b, a.document_id AS da, b.document_id AS db")
        parents = await rows(
            "MATCH (d:Document) OPTIONAL MATCH (h:Heading)-[:PARENT_OF]->(d) RETURN d.id AS id, count(h) AS n")
        headings = await rows("MATCH (h:Heading) WITH h.id AS id, count(*) AS n WHERE n > 1 RETURN id, n")
    finally:
        await driver.close()
    docs: dict[str, str] = {}
    for r in doc_rows:
        if r["id"] in docs:
            problems.append(f"neo4j: document {r['id']} stored twice")
        docs[r["id"]] = r["hash"]
    _compare_documents("neo4j", docs, expected, problems)
    by_doc: dict[str, list[str]] = {}
    for r in chunk_rows:
        owners = list(r["owners"])
        if not owners:
            problems.append(f"neo4j: orphan chunk {r['id']} (no document)")
            continue
        if len(owners) > 1:
            problems.append(f"neo4j: chunk {r['id']} under {len(owners)} documents")
        by_doc.setdefault(owners[0], []).append(r["id"])
    _compare_chunks("neo4j", by_doc, expected, problems)
    edges = {(r["a"], r["b"]) for r in next_rows}
    if len(edges) != len(next_rows):
        problems.append("neo4j: duplicated NEXT edges")
    wanted = {(doc.chunk_ids[i], doc.chunk_ids[i + 1]) for doc in expected.values() for i in range(len(doc.chunk_ids) - 1)}
    for a, b in sorted(edges - wanted)[:20]:
        problems.append(f"neo4j: unexpected NEXT edge {a} -> {b}")
    for a, b in sorted(wanted - edges)[:20]:
        if a.rsplit("#", 1)[0] in docs:
            problems.append(f"neo4j: missing NEXT edge {a} -> {b}")
    for r in parents:
        doc = expected.get(r["id"])
        if doc is not None and r["n"] != (1 if doc.has_parent else 0):
            problems.append(f"neo4j: document {r['id']} has {r['n']} parent headings")
    for r in headings:
        problems.append(f"neo4j: heading {r['id']} stored {r['n']} times")
    return problems


async def check_stores(dsn: str, neo4j_uri: str, expected: dict[str, ExpectedDocument], *,
                       auth: tuple[str, str] | None = None, database: str | None = None) -> list[str]:
    """Every problem in both stores; [] when they hold exactly ``expected``
    (``auth`` and ``database`` as for ``check_neo4j``)."""
    return [*await check_postgres(dsn, expected),
            *await check_neo4j(neo4j_uri, expected, auth=auth, database=database)]


def _compare_documents(store: str, docs: dict[str, str], expected: dict[str, ExpectedDocument],
                       problems: list[str]) -> None:
    missing = sorted(set(expected) - set(docs))
    extra = sorted(set(docs) - set(expected))
    if missing:
        problems.append(f"{store}: {len(missing)} documents missing, e.g. {missing[:5]}")
    if extra:
        problems.append(f"{store}: {len(extra)} unexpected documents, e.g. {extra[:5]}")
    stale = sorted(i for i in set(docs) & set(expected) if docs[i] != expected[i].content_hash)
    if stale:
        problems.append(f"{store}: {len(stale)} documents with another content hash (half-written or stale), e.g. {stale[:5]}")


def _compare_chunks(store: str, by_doc: dict[str, list[str]], expected: dict[str, ExpectedDocument],
                    problems: list[str]) -> None:
    for doc_id, ids in by_doc.items():
        doc = expected.get(doc_id)
        if doc is None:
            problems.append(f"{store}: {len(ids)} chunks of unexpected document {doc_id}")
            continue
        if len(ids) != len(set(ids)):
            problems.append(f"{store}: document {doc_id} has duplicated chunks")
        if sorted(set(ids)) != sorted(doc.chunk_ids) or len(ids) != len(doc.chunk_ids):
            problems.append(f"{store}: document {doc_id} has chunks {sorted(ids)[:6]}, expected {list(doc.chunk_ids)[:6]}")
    for doc_id, doc in expected.items():
        if doc.chunk_ids and doc_id not in by_doc:
            problems.append(f"{store}: document {doc_id} has no chunks")


def summary(expected: dict[str, ExpectedDocument]) -> dict:
    """Counts of an expected state, for reports."""
    return {"documents": len(expected), "chunks": sum(len(d.chunk_ids) for d in expected.values())}


def dumps(problems: list[str]) -> str:
    return json.dumps(problems, ensure_ascii=False, indent=1)
