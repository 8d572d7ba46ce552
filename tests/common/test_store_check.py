"""The crash-trial checker (services/common/store_check.py) against real PostgreSQL and
Neo4j: a clean ingest passes, and every planted defect (a duplicate chunk,
an orphan chunk, a half-written document, a stale hash) is reported, so the
check can fail."""
from __future__ import annotations

import json

import asyncpg
import pytest
import pytest_asyncio
from neo4j import AsyncGraphDatabase

from services.common.store_check import check_neo4j, check_postgres, check_stores, expected_documents
from services.ingest.chunking import ChunkingConfig, chunk_document
from services.ingest.jsonl_documents import parse_jsonl
from services.retriever_graph.store import GraphStore
from services.retriever_pg.store import PgStore

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]
DIM = 4
LINES = [json.dumps({"id": str(i), "law": "中华人民共和国测试法", "chapter": "第一章 总则", "article": f"第{i}条",
                     "text": ("本条规定测试内容。" * (90 if i % 3 == 0 else 3)) + f"第{i}项。"}, ensure_ascii=False)
         for i in range(1, 13)]


def records(lines):
    docs, _ = parse_jsonl("\n".join(lines).encode())
    out = []
    for d in docs:
        rec = chunk_document(d.id, d.title, d.heading_path, d.text, d.metadata, ChunkingConfig())
        for c in rec.chunks:
            c.embedding = [0.5, 0.5, 0.5, 0.5]
        out.append(rec)
    return out


@pytest_asyncio.fixture(loop_scope="session")
async def stores(pg_new_database, neo4j_uri):
    dsn = await pg_new_database()
    pg = PgStore(dsn, DIM, initial_load_quiet_s=0)  # the index is checked right after the ingest
    await pg.open()
    await pg.migrate()
    graph = GraphStore(neo4j_uri)
    await graph.open()
    await graph.driver.execute_query("MATCH (n) DETACH DELETE n")
    await graph.migrate()
    recs = records(LINES)
    await pg.ingest_documents(recs)
    await graph.ingest_documents(recs)
    try:
        yield dsn, neo4j_uri
    finally:
        await pg.close()
        await graph.close()


async def test_a_clean_ingest_passes(stores):
    dsn, uri = stores
    expected = expected_documents(LINES)
    assert sum(len(d.chunk_ids) for d in expected.values()) > len(expected)  # some documents have several chunks
    assert await check_stores(dsn, uri, expected) == []


async def test_a_planted_duplicate_chunk_is_found_in_postgres(stores):
    dsn, _ = stores
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("INSERT INTO chunks (id, document_id, ordinal, text, embedding, term_count) "
                           "SELECT id || '-dup', document_id, ordinal, text, embedding, term_count FROM chunks WHERE id = '3#0'")
        problems = await check_postgres(dsn, expected_documents(LINES))
    finally:
        await conn.execute("DELETE FROM chunks WHERE id = '3#0-dup'")
        await conn.close()
    assert any("document 3 has chunks" in p for p in problems), problems


async def test_a_planted_duplicate_chunk_is_found_in_neo4j(stores):
    _, uri = stores
    driver = AsyncGraphDatabase.driver(uri, auth=None)
    try:
        await driver.execute_query(
            "MATCH (d:Document {id: '3'})-[:HAS_CHUNK]->(c:Chunk {id: '3#0'}) "
            "CREATE (d)-[:HAS_CHUNK]->(:Chunk {id: '3#0-dup', document_id: '3', text: c.text})")
        await driver.execute_query("CREATE (:Chunk {id: 'orphan#0', document_id: 'nobody'})")
        problems = await check_neo4j(uri, expected_documents(LINES))
    finally:
        await driver.execute_query("MATCH (c:Chunk) WHERE c.id IN ['3#0-dup', 'orphan#0'] DETACH DELETE c")
        await driver.close()
    assert any("document 3 has chunks" in p for p in problems), problems
    assert any("orphan chunk orphan#0" in p for p in problems), problems


async def test_half_written_and_stale_documents_are_found(stores):
    dsn, uri = stores
    changed = [LINES[0].replace("第1项", "第1项修订")] + LINES[1:]
    problems = await check_stores(dsn, uri, expected_documents(changed))
    assert any("pg: 1 documents with another content hash" in p for p in problems), problems
    assert any("neo4j: 1 documents with another content hash" in p for p in problems), problems

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("DELETE FROM chunk_terms WHERE chunk_id = '2#0'")
        problems = await check_postgres(dsn, expected_documents(LINES))
    finally:
        await conn.close()
    assert any("chunk 2#0 has terms but no postings" in p for p in problems), problems
    missing = await check_stores(dsn, uri, expected_documents(LINES + [LINES[0].replace('"1"', '"99"', 1)]))
    assert any("documents missing" in p for p in missing), missing
