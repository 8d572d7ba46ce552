"""Collections, metadata filters, deletion and migration 4 of retriever_pg
against a real PostgreSQL: every channel searches only its scope and
still fills top_k; deletion leaves nothing of a document behind (checked
in the tables); a store migrated from before collections keeps working as
"default"; the same-document boost helps on a long document."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import pytest_asyncio

from services.common import names
from services.common.filters import parse_filter
from services.common.records import ChunkRecord, DocumentRecord, text_digest
from services.common.retriever import RetrievalQuery
from services.common.text import document_terms, query_keywords
from services.ingest.chunking import ChunkingConfig, chunk_sections
from services.ingest.files.model import Block, Section
from services.retriever_pg.backend import PgBackend, PgChannelConfig
from services.retriever_pg.entity_store import EntityCard, EntityCardStore
from services.retriever_pg.store import PgStore, _migrations

DIM = 8
pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]


def vec(i: int, j: int = 0, weight: float = 0.0) -> list[float]:
    v = np.full(DIM, 0.01)
    v[i % DIM] = 1.0
    v[j % DIM] += weight
    return (v / np.linalg.norm(v)).tolist()


def doc(doc_id: str, text: str, *, collection: str = "default", metadata: dict | None = None,
        embedding: list[float] | None = None, chunks: int = 1) -> DocumentRecord:
    texts = [text] if chunks == 1 else [f"{text}（第{i}段）" for i in range(chunks)]
    records = [ChunkRecord(id=f"{doc_id}#{i}", document_id=doc_id, ordinal=i, heading_path=["测试", doc_id], text=t,
                           embedding=embedding or vec(0), terms=document_terms(t), metadata={"page": str(i + 1)})
               for i, t in enumerate(texts)]
    digest = hashlib.sha256(f"{doc_id}|{text}|{collection}|{metadata}".encode()).hexdigest()
    return DocumentRecord(id=doc_id, title="测试", heading_path=["测试"], metadata=dict(metadata or {}),
                          content_hash=digest, chunks=records, collection=collection, source=f"{doc_id}.txt")


@pytest_asyncio.fixture(loop_scope="session")
async def store(pg_new_database):
    s = PgStore(await pg_new_database(), DIM, pool_min=1, pool_max=3)
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def rows(store: PgStore, sql: str, *args) -> list:
    async with store.connection() as conn:
        return await conn.fetch(sql, *args)


async def test_collections_keep_overlapping_text_apart_in_every_channel(store):
    text = "员工出差住宿费按照城市类别分级报销，超出标准的部分由个人承担。"
    result = await store.ingest_documents([doc("a-1", text, collection="alpha"), doc("b-1", text, collection="beta"),
                                           doc("a-2", "差旅补助按天计算。", collection="alpha")])
    assert (result.stored, result.failures) == (3, [])
    keywords = query_keywords("住宿费报销标准")
    for collections, expected in ((["alpha"], {"a-1"}), (["beta"], {"b-1"}), (["alpha", "beta"], {"a-1", "b-1"})):
        found = {
            "vector": await store.vector_search(vec(0), 10, collections),
            "keyword": await store.keyword_search(keywords, 10, collections),
            "fulltext": await store.fulltext_search(keywords, 10, collections),
            "trigram": await store.trigram_search("住宿费", 10, collections),
        }
        for channel, hits in found.items():
            ids = {h.document_id for h in hits}
            assert expected <= ids, (channel, collections)
            assert {h.collection for h in hits} <= set(collections), channel
        assert {h.document_id for h in found["trigram"]} == expected
    hit = (await store.keyword_search(keywords, 1, ["beta"]))[0]
    assert (hit.collection, hit.metadata) == ("beta", {"page": "1"})


async def test_a_filter_returns_only_matching_documents_and_still_fills_top_k(store):
    # 60 repealed articles are closer to the query in every channel than the
    # 15 in force; top 10 of the in-force ones must still come back.
    docs = [doc(f"old-{i}", f"废止条文{i}：排污单位超标排放大气污染物的，责令改正并处以罚款。超标排放罚款。",
                collection="laws", metadata={"status": "已废止", "year": str(1990 + i % 10)}, embedding=vec(1, 2, 0.05))
            for i in range(60)]
    docs += [doc(f"new-{i}", f"现行条文{i}：超标排放的，处以罚款。", collection="laws",
                 metadata={"status": "现行有效", "year": str(2010 + i)}, embedding=vec(2, 1, 0.3)) for i in range(15)]
    assert (await store.ingest_documents(docs)).stored == 75
    in_force = parse_filter('status = "现行有效"')
    keywords = query_keywords("超标排放罚款")
    channels = {
        "vector": await store.vector_search(vec(1), 10, ["laws"], in_force),
        "keyword": await store.keyword_search(keywords, 10, ["laws"], in_force),
        "fulltext": await store.fulltext_search(keywords, 10, ["laws"], in_force),
        "trigram": await store.trigram_search("超标排放", 10, ["laws"], in_force),
    }
    unfiltered = await store.keyword_search(keywords, 10, ["laws"])
    assert {h.document_id.split("-")[0] for h in unfiltered} == {"old"}  # without the filter, repealed ones win
    for channel, hits in channels.items():
        assert len(hits) == 10, channel
        assert all(h.document_id.startswith("new-") and h.metadata["status"] == "现行有效" for h in hits), channel
    # in-list and numeric range are pushed down too
    recent = await store.keyword_search(keywords, 100, ["laws"], parse_filter("year >= 2020 AND year < 2023"))
    assert sorted(h.document_id for h in recent) == ["new-10", "new-11", "new-12"]
    either = await store.vector_search(vec(1), 100, ["laws"], parse_filter('year IN ("1990", "2010")'))
    assert sorted(h.document_id for h in either) == sorted([f"old-{i}" for i in range(0, 60, 10)] + ["new-0"])
    listed = await store.list_documents([], ["laws"], in_force, 100)
    assert [d.id for d in listed] == sorted(f"new-{i}" for i in range(15))


def _plans() -> dict[str, float]:
    from prometheus_client import REGISTRY

    return {plan: REGISTRY.get_sample_value("graphmesh_pg_vector_search_total", {"plan": plan}) or 0.0
            for plan in ("exact", "hnsw", "hnsw_then_exact")}


async def test_a_small_scope_is_searched_exactly_and_a_large_one_through_the_index(store):
    rng = np.random.default_rng(5)
    bulk = [doc(f"bulk-{i}", f"大库条文{i}", collection="bulk", embedding=(v / np.linalg.norm(v)).tolist())
            for i, v in enumerate(rng.standard_normal((400, DIM)))]
    few = [doc(f"few-{i}", f"小库条文{i}", collection="few", embedding=vec(3, 4 + i, 0.2 * i)) for i in range(4)]
    assert (await store.ingest_documents(bulk + few)).stored == 404
    async with store.connection() as conn:
        await conn.execute("ANALYZE documents")
        await conn.execute("ANALYZE chunks")
    await store.refresh_stats()

    before = _plans()
    hits = await store.vector_search(vec(3), 3, ["few"])
    after = _plans()
    assert after["exact"] == before["exact"] + 1 and after["hnsw"] == before["hnsw"]
    assert [h.document_id for h in hits] == ["few-0", "few-1", "few-2"]  # exact: nearest first

    hits = await store.vector_search(vec(3), 5, ["bulk"])
    assert _plans()["hnsw"] == after["hnsw"] + 1
    assert len(hits) == 5 and {h.collection for h in hits} == {"bulk"}


async def test_delete_leaves_nothing_of_the_document_and_is_idempotent(store):
    await store.ingest_documents([doc("gone", "待删除的文件内容，关于保密义务。", collection="del", chunks=3, metadata={"k": "v"}),
                                  doc("kept", "保留的文件内容，关于保密义务。", collection="del", chunks=2)])
    before = await rows(store, "SELECT count(*) AS n FROM chunk_terms WHERE chunk_id LIKE 'gone#%'")
    deleted = await store.delete_documents(["gone"], None, [])
    assert (deleted.documents, deleted.chunks, deleted.vectors, deleted.document_ids) == (1, 3, 3, ["gone"])
    assert deleted.postings == before[0]["n"] > 0
    assert not await rows(store, "SELECT 1 FROM documents WHERE id = 'gone'")
    assert not await rows(store, "SELECT 1 FROM chunks WHERE document_id = 'gone'")
    assert not await rows(store, "SELECT 1 FROM chunk_terms WHERE chunk_id LIKE 'gone#%'")
    assert len(await rows(store, "SELECT 1 FROM chunks WHERE document_id = 'kept'")) == 2
    keywords = query_keywords("保密义务")
    for hits in (await store.keyword_search(keywords, 10, ["del"]), await store.fulltext_search(keywords, 10, ["del"]),
                 await store.trigram_search("保密", 10, ["del"]), await store.vector_search(vec(0), 10, ["del"])):
        assert {h.document_id for h in hits} == {"kept"}
    assert (await store.delete_documents(["gone"], None, [])).documents == 0  # idempotent
    # by filter, only in scope
    await store.ingest_documents([doc("f1", "甲", collection="del", metadata={"status": "已废止"}),
                                  doc("f2", "乙", collection="other", metadata={"status": "已废止"})])
    by_filter = await store.delete_documents([], ["del"], parse_filter('status = "已废止"'))
    assert by_filter.document_ids == ["f1"]
    assert [d.id for d in await store.list_documents(["f2"], None, [], 10)] == ["f2"]


async def test_a_collection_is_deleted_a_batch_of_documents_a_transaction(store, monkeypatch):
    """A trial's delete of the law collection (26,196 documents) ran out of lock slots in one
    transaction and deleted nothing: deletion now goes DELETE_BATCH documents a transaction."""
    from tests.deletion_batches import record_batches_of_two

    await store.ingest_documents([doc(f"batch{i}", f"分批删除的文件{i}。", collection="big") for i in range(5)]
                                 + [doc("other1", "另一个集合的文件。", collection="small")])
    calls = record_batches_of_two(monkeypatch, store)
    backend = PgBackend(store, PgChannelConfig())
    deleted = await backend.delete_documents([], ["big"], [])
    assert deleted.documents == 5 and deleted.document_ids == [f"batch{i}" for i in range(5)]
    assert calls == [["batch0", "batch1"], ["batch2", "batch3"], ["batch4"], []]  # the last: the scope, now empty
    assert not await rows(store, "SELECT 1 FROM documents WHERE collection = 'big'")
    assert [d.id for d in await store.list_documents([], ["small"], [], 10)] == ["other1"]
    calls.clear()
    await store.ingest_documents([doc(f"again{i}", f"再删一次{i}。", collection="big") for i in range(3)])
    assert (await backend.delete_documents(["again0", "again1", "again2"], None, [])).documents == 3
    assert calls == [["again0", "again1"], ["again2"]]


async def test_reingest_replaces_chunks_atomically_and_ids_stay_in_their_collection(store):
    await store.ingest_documents([doc("re", "旧版本内容。", collection="re", chunks=3)])
    changed = doc("re", "新版本内容。", collection="re", chunks=2)
    assert (await store.ingest_documents([changed])).stored == 1
    chunks = await rows(store, "SELECT id, text FROM chunks WHERE document_id = 're' ORDER BY id")
    assert [(r["id"], r["text"]) for r in chunks] == [("re#0", "新版本内容。（第0段）"), ("re#1", "新版本内容。（第1段）")]
    assert not await rows(store, "SELECT 1 FROM chunk_terms WHERE chunk_id = 're#2'")
    assert not await rows(store, "SELECT 1 FROM chunk_terms t JOIN chunks c ON c.id = t.chunk_id WHERE c.text LIKE '旧版本%'")
    moved = doc("re", "新版本内容。", collection="elsewhere")
    result = await store.ingest_documents([moved, doc("re-ok", "另一份。", collection="elsewhere")])
    assert result.stored == 1 and [f.id for f in result.failures] == ["re"]
    assert "stored in collection 're'" in result.failures[0].reason
    assert [d.collection for d in await store.list_documents(["re"], None, [], 1)] == ["re"]
    # an ingest that stored nothing does not create its collection
    result = await store.ingest_documents([doc("re", "新版本内容。", collection="phantom")])
    assert result.stored == 0 and [f.id for f in result.failures] == ["re"]
    assert "phantom" not in await store.collection_packs()


async def test_same_document_boost_brings_the_chunks_around_hits_of_a_long_document(store):
    paragraphs = [f"第{i}段说明报销流程中的一般事项，内容与其他段落相近。" for i in range(40)]
    paragraphs[20] = "第20段规定：员工应当在出差结束后十五日内提交报销单据，并附上发票原件。"
    paragraphs[19] = "第19段涉及差旅审批回溯机制。"
    paragraphs[21] = "第21段涉及差旅审批回溯机制的例外。"
    sections = [Section(["报销流程"], [Block(p) for p in paragraphs])]
    record = chunk_sections("long", "差旅手册", ["差旅手册"], sections, {}, ChunkingConfig(24, 0), collection="long")
    assert len(record.chunks) >= 30
    for c in record.chunks:
        c.embedding = vec(5)
    assert (await store.ingest_documents([record])).stored == 1
    seeds = [c for c in record.chunks if "回溯机制" in c.text]
    target = next(c for c in record.chunks if "十五日内" in c.text)
    assert len(seeds) == 2 and all(abs(s.ordinal - target.ordinal) <= 2 for s in seeds)
    backend = PgBackend(store, PgChannelConfig(boost=True))
    query = RetrievalQuery(query="差旅审批回溯机制", keywords=["回溯", "机制"], embedding=[], top_k=10, collections=["long"])
    hits, _ = await backend.retrieve(query)
    by_channel = {}
    for h in hits:
        by_channel.setdefault(h.channel, set()).add(h.chunk_id)
    assert target.id not in by_channel[names.PG_KEYWORD]  # the keywords alone miss it
    assert target.id in by_channel[names.PG_BOOST]  # the boost brings it
    without, _ = await PgBackend(store, PgChannelConfig(boost=False)).retrieve(query)
    assert target.id not in {h.chunk_id for h in without}
    elsewhere, _ = await backend.retrieve(RetrievalQuery(query="差旅审批回溯机制", keywords=["回溯", "机制"], embedding=[],
                                                         top_k=10, collections=["other"]))
    assert not elsewhere


async def test_entity_cards_belong_to_collections(store):
    cards = EntityCardStore(store.connection, DIM)
    card = EntityCard(name="差旅补助", category="费用", aliases=["出差补贴"], surface_embeddings=[vec(3), vec(3)])
    assert (await cards.ingest([card], "fin")).stored == 1
    assert (await cards.ingest([EntityCard(name="差旅补助", category="其他", surface_embeddings=[vec(3)])], "hr")).stored == 1
    fin = await cards.keyword_search("差旅补助", 5, ["fin"])
    assert [(h.name, h.category) for h in fin] == [("差旅补助", "费用")]
    assert [h.category for h in await cards.vector_search(vec(3), 5, ["hr"])] == ["其他"]
    assert await cards.collection_counts() == {"fin": 1, "hr": 1}
    assert await cards.delete_collection("fin") == 1
    assert await cards.keyword_search("差旅补助", 5, ["fin"]) == []
    assert not await rows(store, "SELECT 1 FROM entity_surfaces WHERE collection = 'fin'")
    assert len(await cards.keyword_search("差旅补助", 5, ["hr"])) == 1


async def test_migration_4_upgrades_a_store_ingested_before_collections(pg_new_database):
    dsn = await pg_new_database()
    old = PgStore(dsn, DIM, pool_min=1, pool_max=2)
    await old.open()
    async with old.connection() as conn:  # the schema and data of a store at version 3
        await conn.execute("CREATE TABLE schema_migrations (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        for version, statements in _migrations(DIM):
            if version <= 3:
                for sql in statements:
                    await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", version)
    await old.close()
    old = PgStore(dsn, DIM, pool_min=1, pool_max=2)
    await old.open()
    async with old.connection() as conn:
        await conn.execute("INSERT INTO documents (id, title, heading_path, metadata, content_hash) "
                           "VALUES ('7', '专利法', '{专利法}', '{\"status\": \"现行有效\"}', 'h')")
        await conn.execute("INSERT INTO chunks (id, document_id, ordinal, heading_path, text, term_count) "
                           "VALUES ('7#0', '7', 0, '{专利法}', '对发明人的专利申请，任何单位不得压制。', 2)")
        await conn.execute("INSERT INTO documents (id, title, heading_path, metadata, content_hash) "
                           "VALUES ('en', 'Dive safety', '{}', '{}', 'h2')")
        await conn.execute("INSERT INTO chunks (id, document_id, ordinal, heading_path, text, term_count) "
                           "VALUES ('en#0', 'en', 0, '{}', 'Cylinders are filled only in the station compressor room (压缩机房) by the dive officer on duty, between eight and ten in the morning.', 1)")
        await conn.executemany("INSERT INTO chunk_terms (term, chunk_id, tf, doc_len) VALUES ($1, '7#0', 1, 2)", [("专利",), ("申请",)])
        await conn.execute("INSERT INTO entity_cards (name, card, gram_count, content_hash) VALUES ('专利', '专利', 3, 'x')")
    # 5: each collection's domain pack; 6: the postings generation; 7: each document's writing system;
    # 8: each document's text digest
    assert await old.migrate() == [4, 5, 6, 7, 8]
    assert await old.migrate() == []
    assert await old.collection_packs() == {"default": "law_zh"}  # stored before packs: read as statutes
    listed = await old.list_documents([], ["default"], parse_filter('status = "现行有效"'), 10)
    assert [(d.id, d.collection, d.source) for d in listed] == [("7", "default", "")]
    hits = await old.keyword_search(["专利"], 5, ["default"])
    assert [(h.document_id, h.collection, h.metadata) for h in hits] == [("7", "default", {"status": "现行有效"})]
    assert [h.script for h in hits] == ["cjk"]  # backfilled from its chunks by migration 7
    async with old.connection() as conn:
        assert await conn.fetchval("SELECT script FROM documents WHERE id = 'en'") == "latin"
        assert await conn.fetchval("SELECT text_digest FROM documents WHERE id = '7'") == \
            text_digest(["对发明人的专利申请，任何单位不得压制。"])  # migration 8, as the code digests it
    assert await EntityCardStore(old.connection, DIM).collection_counts() == {"default": 1}
    await old.close()


@pytest.mark.parametrize("keyword_cache_mb", [0, 64], ids=["sql", "in_memory"])
async def test_a_collections_bm25_scores_do_not_move_with_another_collection(pg_new_database, keyword_cache_mb):
    """A trial's pg.keyword score of one chunk went from 12.959 to 3.848 when it deleted an unrelated
    collection: N, df and avgdl were the whole store's. A collection is now scored as if it were alone,
    by the SQL channel and by the postings in memory alike, and the whole store still by its own."""
    store = PgStore(await pg_new_database(), DIM, pool_min=1, pool_max=3, keyword_cache_mb=keyword_cache_mb)
    await store.open()
    await store.migrate()
    try:
        mine = [doc(f"mine-{i}", text, collection="mine") for i, text in enumerate(
            ["会议室预订须提前一天。", "报销单每月十日前提交。", "年假五天，病假另计。"])]
        await store.ingest_documents(mine)
        await store.refresh_stats()

        async def scores(collections) -> dict[str, float]:
            return {h.chunk_id: h.score for h in await store.keyword_search(query_keywords("会议室预订"), 100, collections)}

        alone = await scores(["mine"])
        others = [doc(f"other-{i}", f"会议室预订第{i}条，会议室预订规则。", collection="other") for i in range(30)]
        await store.ingest_documents(others)
        await store.refresh_stats()
        assert await scores(["mine"]) == pytest.approx(alone, rel=1e-9) and alone
        store_wide = await scores(None)
        assert store_wide["mine-0#0"] < alone["mine-0#0"]  # 会议室 in 31 of 33 chunks: common in the store
        await store.delete_documents([], ["other"], ())
        await store.refresh_stats()
        assert await scores(["mine"]) == pytest.approx(alone, rel=1e-9)
    finally:
        await store.close()
