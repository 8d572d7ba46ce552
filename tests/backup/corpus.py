"""A small two-collection corpus stored in real PostgreSQL and Neo4j, with
library entities and triples, and the searches the backup tests compare
before and after a restore."""
from __future__ import annotations

import json
import os
import zlib

import numpy as np

from services.common.records import EntityRecord
from services.ingest.chunking import ChunkingConfig, chunk_document
from services.ingest.jsonl_documents import parse_jsonl
from services.retriever_graph.kg_store import KnowledgeGraphStore
from services.retriever_graph.store import GraphStore
from services.retriever_pg.store import PgStore

DIM = 8
LAW = [json.dumps({"id": f"law-{i}", "law": "中华人民共和国测试法", "chapter": "第一章 总则", "article": f"第{i}条",
                   "text": ("劳动者享有休息休假的权利。" * (40 if i % 3 == 0 else 2)) + f"第{i}项规定。"},
                  ensure_ascii=False) for i in range(1, 9)]
NOTES = [json.dumps({"id": f"note-{i}", "title": f"操作手册 {i}", "text": f"备份与恢复的步骤说明，第{i}部分。数据库快照。"},
                    ensure_ascii=False) for i in range(1, 5)]
ENTITIES = [EntityRecord(name="劳动者", category="主体", aliases=["职工"]),
            EntityRecord(name="用人单位", category="主体", aliases=["雇主"])]
TRIPLES = [("劳动者", "享有", "休息权"), ("用人单位", "支付", "劳动报酬")]


def neo4j_auth() -> tuple[str | None, str | None]:
    return os.environ.get("GRAPHMESH_TEST_NEO4J_USER"), os.environ.get("GRAPHMESH_TEST_NEO4J_PASSWORD")


def records(lines: list[str], collection: str) -> list:
    """Chunked document records with deterministic embeddings."""
    docs, _ = parse_jsonl("\n".join(lines).encode())
    out = []
    for d in docs:
        rec = chunk_document(d.id, d.title, d.heading_path, d.text, d.metadata, ChunkingConfig())
        rec.collection = collection
        for c in rec.chunks:
            rng = np.random.default_rng(zlib.crc32(c.id.encode()))
            c.embedding = (rng.random(DIM) + 0.01).tolist()
        out.append(rec)
    return out


async def wipe_neo4j(uri: str) -> None:
    """An empty Neo4j: no nodes, relationships, constraints or indexes."""
    user, password = neo4j_auth()
    store = GraphStore(uri, user, password)
    await store.open()
    try:
        driver = store.driver
        await driver.execute_query("MATCH (n) DETACH DELETE n")
        for kind in ("CONSTRAINT", "INDEX"):
            records_, _, _ = await driver.execute_query(f"SHOW {kind}ES YIELD name, type" if kind == "INDEX"
                                                        else "SHOW CONSTRAINTS YIELD name, type")
            for r in records_:
                if r["type"] != "LOOKUP":  # the built-in token lookup indexes stay
                    # Names from the server's own catalog, backtick-quoted.
                    await driver.execute_query(f"DROP {kind} `{r['name'].replace('`', '``')}` IF EXISTS")
    finally:
        await store.close()


async def fill(dsn: str, uri: str) -> None:
    """Migrates both stores and stores the corpus, entities and triples.
    PostgreSQL is closed during its initial load, so the source holds no
    HNSW index (as one backed up during a first load)."""
    user, password = neo4j_auth()
    pg = PgStore(dsn, DIM)
    graph = GraphStore(uri, user, password)
    await pg.open()
    await graph.open()
    try:
        await pg.migrate()
        await graph.driver.execute_query("MATCH (n) DETACH DELETE n")
        await graph.migrate()
        kg = KnowledgeGraphStore(graph.driver)
        await kg.migrate()
        for lines, collection in ((LAW, "default"), (NOTES, "notes")):
            recs = records(lines, collection)
            assert not (await pg.ingest_documents(recs)).failures
            assert not (await graph.ingest_documents(recs)).failures
        await kg.ingest_entities(ENTITIES)
        await kg.ingest_triples(TRIPLES)
    finally:
        await pg.close()
        await graph.close()


async def searches(dsn: str, uri: str) -> dict:
    """Results (ids, rounded scores) of searches through the store APIs."""
    user, password = neo4j_auth()
    pg = PgStore(dsn, DIM)
    graph = GraphStore(uri, user, password)
    await pg.open()
    await graph.open()
    try:
        await pg.refresh_stats()
        query_vec = records(LAW[:1], "default")[0].chunks[0].embedding

        def hits(rows: list) -> list:
            return [(h.chunk_id, round(h.score, 5)) for h in rows]

        kg = KnowledgeGraphStore(graph.driver)
        return {
            "pg.keyword": hits(await pg.keyword_search(["劳动者", "休息"], 5, ["default"])),
            "pg.keyword.notes": hits(await pg.keyword_search(["备份", "恢复"], 5, ["notes"])),
            "pg.vector": hits(await pg.vector_search(query_vec, 5, None)),
            "graph": hits(await graph.retrieve("劳动者休息", ["劳动者", "休息"], 5)),
            "graph.notes": hits(await graph.retrieve("备份", ["备份"], 5, collections=["notes"])),
            "kg": sorted(h.name for h in await kg.lookup(["劳动者", "雇主"])),
            "counts": {"pg": await pg.collection_counts(), "graph": await graph.collection_counts(),
                       "kg": await kg.entity_counts()},
        }
    finally:
        await pg.close()
        await graph.close()
