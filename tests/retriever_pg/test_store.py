"""PgStore against a real PostgreSQL (embedded pgserver or GRAPHMESH_TEST_PG_DSN)."""
from __future__ import annotations

import asyncio
import hashlib
import math
from collections import Counter

import numpy as np
import pytest
import pytest_asyncio

from services.common.records import ChunkRecord, DocumentRecord, text_digest
from services.common.text import document_terms, query_keywords
from services.retriever_pg.store import LATEST_SCHEMA_VERSION, PgStore, _migrations

pytestmark = pytest.mark.integration

DIM = 4
LAW = "中华人民共和国劳动合同法"

ARTICLES = {
    "第十条": "建立劳动关系，应当订立书面劳动合同。已建立劳动关系，未同时订立书面劳动合同的，"
    "应当自用工之日起一个月内订立书面劳动合同。用人单位与劳动者在用工前订立劳动合同的，"
    "劳动关系自用工之日起建立。",
    "第十九条": "劳动合同期限三个月以上不满一年的，试用期不得超过一个月；劳动合同期限一年以上"
    "不满三年的，试用期不得超过二个月；三年以上固定期限和无固定期限的劳动合同，试用期不得超过"
    "六个月。同一用人单位与同一劳动者只能约定一次试用期。",
    "第四十七条": "经济补偿按劳动者在本单位工作的年限，每满一年支付一个月工资的标准向劳动者支付。"
    "六个月以上不满一年的，按一年计算；不满六个月的，向劳动者支付半个月工资的经济补偿。",
    "第八十二条": "用人单位自用工之日起超过一个月不满一年未与劳动者订立书面劳动合同的，应当向劳动者"
    "每月支付二倍的工资。用人单位违反本法规定不与劳动者订立无固定期限劳动合同的，自应当订立"
    "无固定期限劳动合同之日起向劳动者每月支付二倍的工资。",
}


def unit(*xs: float) -> list[float]:
    v = np.asarray(xs, dtype=float)
    return (v / np.linalg.norm(v)).tolist()


def make_doc(
    doc_id: str,
    texts: list[str],
    *,
    embeddings: list[list[float]] | None = None,
    terms: list[list[str]] | None = None,
    title: str = LAW,
) -> DocumentRecord:
    chunks = []
    for i, text in enumerate(texts):
        chunks.append(
            ChunkRecord(
                id=f"{doc_id}#{i}",
                document_id=doc_id,
                ordinal=i,
                heading_path=[title, doc_id],
                text=text,
                parent_context=title,
                embedding=(embeddings[i] if embeddings else []),
                terms=(terms[i] if terms is not None else document_terms(f"{doc_id} {text}")),
            )
        )
    digest = hashlib.sha256("\x1f".join([title, doc_id, *texts]).encode()).hexdigest()
    return DocumentRecord(
        id=doc_id, title=title, heading_path=[title], metadata={"source": "test"},
        content_hash=digest, chunks=chunks,
    )


@pytest_asyncio.fixture(loop_scope="session")
async def store(pg_dsn: str):
    # The index's life row by row and in bulk loads; the initial load has
    # its own tests (test_store_initial_load.py).
    s = PgStore(pg_dsn, DIM, pool_min=1, pool_max=2, initial_load_quiet_s=0)
    await s.open()
    await s.migrate()
    async with s._conn() as conn:  # noqa: SLF001 - test isolation
        await conn.execute("TRUNCATE documents, chunks, chunk_terms")
    await s.refresh_stats()
    try:
        yield s
    finally:
        await s.close()


async def fetchval(store: PgStore, sql: str, *args):
    async with store._conn() as conn:  # noqa: SLF001
        return await conn.fetchval(sql, *args)


# ------------------------------------------------------------------ schema


async def test_migrate_is_idempotent_and_safe_concurrently(pg_new_database):
    dsn = await pg_new_database()
    stores = [PgStore(dsn, DIM, pool_min=1, pool_max=1) for _ in range(3)]
    try:
        for s in stores:
            await s.open()
        applied = await asyncio.gather(*(s.migrate() for s in stores))
        # Exactly one caller applied the schema; the others waited on the lock.
        assert sorted(len(a) for a in applied) == [0, 0, LATEST_SCHEMA_VERSION]
        assert await stores[0].migrate() == []
        async with stores[0]._conn() as conn:  # noqa: SLF001
            versions = [r[0] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY 1")]
            assert versions == list(range(1, LATEST_SCHEMA_VERSION + 1))
            exts = {r[0] for r in await conn.fetch("SELECT extname FROM pg_extension")}
            assert {"vector", "pg_trgm"} <= exts
            indexes = {r["indexname"]: r["indexdef"] for r in await conn.fetch(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")}
            assert "USING hnsw (embedding vector_cosine_ops)" in indexes["chunks_embedding_hnsw_idx"]
            assert "INCLUDE (chunk_id, tf, doc_len, collection)" in indexes["chunk_terms_term_idx"]  # migration 4
            assert not any("english" in d for d in indexes.values())
        assert await stores[0].count_documents() == 0
    finally:
        for s in stores:
            await s.close()


async def test_migrate_rejects_a_different_embedding_dimension(store, pg_dsn):
    other = PgStore(pg_dsn, 8)
    await other.open()
    try:
        with pytest.raises(ValueError, match=r"dimension 4.*embedding_dim=8"):
            await other.migrate()
    finally:
        await other.close()


# ------------------------------------------------------------------ pool


async def test_a_caller_cancelled_while_its_connection_is_set_up_gives_the_connection_back(store):
    """A gRPC call whose deadline passes is cancelled wherever it is, also
    inside the statement_timeout SET of _acquire: the connection must go
    back to the pool, or a burst of short deadlines empties it for good."""
    async def borrow():
        async with store._conn():  # noqa: SLF001
            await asyncio.sleep(0)

    for delay in [0.0, 0.0001, 0.0002, 0.0005, 0.001, 0.002] * 25:
        task = asyncio.create_task(borrow())
        await asyncio.sleep(delay)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0.2)
    pool = store._pool  # noqa: SLF001
    lost = pool.get_size() - pool.get_idle_size()
    if lost:  # the fixture's close() would wait for them forever
        pool.terminate()
        store._pool = None  # noqa: SLF001
    assert lost == 0
    assert await asyncio.wait_for(fetchval(store, "SELECT 1"), 2) == 1


# ------------------------------------------------------------------ ingest


async def test_reingest_with_same_hash_is_unchanged(store):
    docs = [make_doc(k, [v]) for k, v in ARTICLES.items()]
    first = await store.ingest_documents(docs)
    assert (first.stored, first.unchanged, first.failures) == (4, 0, [])
    again = await store.ingest_documents(docs)
    assert (again.stored, again.unchanged, again.failures) == (0, 4, [])
    assert await store.count_documents() == 4
    hashes = await store.document_hashes(["第十条", "第十九条", "nope"])
    assert hashes == {"第十条": docs[0].content_hash, "第十九条": docs[1].content_hash}
    assert await fetchval(store, "SELECT count(*) FROM chunks") == 4
    # term rows: one per distinct term, tf = count, doc_len = len(terms)
    terms = docs[1].chunks[0].terms
    rows = await fetchval(store, "SELECT array_agg(ROW(term, tf, doc_len)::text) FROM chunk_terms WHERE chunk_id = $1",
                          "第十九条#0")
    assert len(rows) == len(set(terms))
    assert await fetchval(store, "SELECT tf FROM chunk_terms WHERE chunk_id = $1 AND term = '试用期'",
                          "第十九条#0") == Counter(terms)["试用期"] == 4
    assert await fetchval(store, "SELECT DISTINCT doc_len FROM chunk_terms WHERE chunk_id = $1",
                          "第十九条#0") == len(terms)


async def test_changed_document_is_replaced_without_leftovers(store):
    old = make_doc("第十九条", ARTICLES["第十九条"].split("；"))
    assert len(old.chunks) == 3
    assert (await store.ingest_documents([old])).stored == 1
    assert [h.document_id for h in await store.keyword_search(["试用期"], 10)] == ["第十九条"] * 3

    new = make_doc("第十九条", ["同一用人单位与同一劳动者只能约定一次。"])
    assert new.content_hash != old.content_hash
    res = await store.ingest_documents([new])
    assert (res.stored, res.unchanged, res.failures) == (1, 0, [])
    assert await fetchval(store, "SELECT array_agg(id ORDER BY id) FROM chunks") == ["第十九条#0"]
    assert await fetchval(store, "SELECT count(*) FROM chunk_terms WHERE chunk_id <> '第十九条#0'") == 0
    assert await store.keyword_search(["试用期"], 10) == []
    [hit] = await store.chunks_by_ids(["第十九条#0", "第十九条#1"])
    assert hit.text == "同一用人单位与同一劳动者只能约定一次。"
    assert (await store.document_hashes(["第十九条"]))["第十九条"] == new.content_hash


async def test_bad_documents_are_reported_and_others_stored(store):
    await store.ingest_documents([make_doc("第十条", [ARTICLES["第十条"]])])
    good1 = make_doc("第十九条", [ARTICLES["第十九条"]], embeddings=[unit(1, 0, 0, 0)])
    wrong_dim = make_doc("bad-dim", ["维度错误"], embeddings=[[0.1] * (DIM + 1)])
    nul = make_doc("bad-nul", ["第一段", "含有\x00空字符"])
    # Passes client-side checks, fails in PostgreSQL (chunk id owned by another
    # document): exercises the per-document retry after a failed batch.
    collide = make_doc("bad-collide", ["第一段", "第二段"])
    collide.chunks[1].id = "第十条#0"
    collide.chunks[1].document_id = ""
    good2 = make_doc("第四十七条", [ARTICLES["第四十七条"]])
    dup = make_doc("第四十七条", ["重复"])

    res = await store.ingest_documents([good1, wrong_dim, nul, collide, good2, dup])
    assert res.stored == 2 and res.unchanged == 0
    assert [(f.index, f.id) for f in res.failures] == [
        (1, "bad-dim"), (2, "bad-nul"), (3, "bad-collide"), (5, "第四十七条")]
    assert "dimension 5, expected 4" in res.failures[0].reason
    assert "NUL" in res.failures[1].reason
    assert "UniqueViolation" in res.failures[2].reason
    assert "duplicate document id" in res.failures[3].reason
    assert set(await store.document_hashes(["第十九条", "bad-dim", "bad-nul", "bad-collide", "第四十七条"])) == {
        "第十九条", "第四十七条"}
    # nothing half-written for the failed documents
    assert await fetchval(store, "SELECT count(*) FROM chunks WHERE document_id LIKE 'bad-%'") == 0
    assert await fetchval(store, "SELECT count(*) FROM chunk_terms WHERE chunk_id LIKE 'bad-%'") == 0
    [kept] = await store.chunks_by_ids(["第十条#0"])
    assert kept.document_id == "第十条"
    assert await store.count_documents() == 3


# ------------------------------------------------------------------ search


async def test_vector_search_returns_nearest_first(store):
    vecs = {
        "第十条": unit(1, 0, 0, 0),
        "第十九条": unit(0.8, 0.6, 0, 0),
        "第四十七条": unit(0, 1, 0, 0),
        "第八十二条": unit(0, 0, 0.6, 0.8),
    }
    docs = [make_doc(k, [ARTICLES[k]], embeddings=[v]) for k, v in vecs.items()]
    docs.append(make_doc("无向量", ["没有嵌入向量的条文。"]))  # embedding stored as NULL
    assert (await store.ingest_documents(docs)).stored == 5

    query = [0.95, 0.3, 0.05, 0.0]
    hits = await store.vector_search(query, 10)
    q = np.asarray(query) / np.linalg.norm(query)
    expected = sorted(((float(q @ np.asarray(v)), k) for k, v in vecs.items()), reverse=True)
    assert [h.document_id for h in hits] == [k for _, k in expected]
    assert hits[0].document_id == "第十条"
    for hit, (cos, _) in zip(hits, expected):
        assert hit.score == pytest.approx(cos, abs=1e-5)
        assert hit.channel == "pg.vector" and hit.evidence == "cosine"
        assert hit.title == LAW and hit.ordinal == 0
        assert hit.embedding == pytest.approx(vecs[hit.document_id], abs=1e-6)
    assert [h.document_id for h in await store.vector_search(unit(0, 0, 0.6, 0.8), 1)] == ["第八十二条"]
    with pytest.raises(ValueError, match="dimension"):
        await store.vector_search([1.0, 0.0], 3)


async def test_each_document_s_writing_system_is_stored_and_every_hit_carries_it(store):
    docs = [make_doc("rules", ["Quiet hours are from 22:00 to 07:00 in every room of the station.", "The word 车辆 means vehicle in these rules."], embeddings=[unit(1, 0, 0, 0)] * 2,
                     title="Housing guide"),
            make_doc("车辆", ["车辆使用费按每公里 0.6 美元计入项目经费。", "config: max_retries = 3"],
                     embeddings=[unit(0, 1, 0, 0)] * 2),
            make_doc("数字表", ["12 | 34 | 56"], embeddings=[unit(0, 0, 1, 0)])]
    assert (await store.ingest_documents(docs)).stored == 3
    hits = await store.vector_search(unit(1, 1, 1, 0), 10)
    # the code line of the Chinese document is of its document's script, not its own
    assert {h.chunk_id: h.script for h in hits} == {"rules#0": "latin", "rules#1": "latin", "车辆#0": "cjk",
                                                   "车辆#1": "cjk", "数字表#0": ""}
    keyword = await store.keyword_search(["quiet", "车辆"], 10)
    assert keyword and all(h.script == {"rules": "latin", "车辆": "cjk"}[h.document_id] for h in keyword)


async def test_documents_with_a_title_asked_are_found_by_it_in_their_collection_only(store):
    docs = [make_doc("制度2024.docx", ["第八条 每月提取额度不超过1500元。"], title="住房公积金提取管理办法"),
            make_doc("制度2026.docx", ["第八条 每月提取额度不超过1800元。"], title="住房公积金提取管理办法"),
            make_doc("其他.txt", ["第一条 另一份文件。"], title="居住证办事指南")]
    assert (await store.ingest_documents(docs)).stored == 3
    found = await store.documents_by_title("default", ["住房公积金提取管理办法", "没有的标题", ""])
    assert found == [("住房公积金提取管理办法", "制度2024.docx"), ("住房公积金提取管理办法", "制度2026.docx")]
    assert await store.documents_by_title("default", ["住房公积金提取管理办法"], per_title=1) == [
        ("住房公积金提取管理办法", "制度2024.docx")]
    assert await store.documents_by_title("elsewhere", ["住房公积金提取管理办法"]) == []


async def test_a_document_with_the_same_text_under_another_id_is_found_by_its_text_digest(store):
    body = ["第一条 员工每年享有带薪年休假。", "第二条 年休假不得折算为现金。"]
    docs = [make_doc("手册.txt", body, title="员工手册"), make_doc("手册副本.txt", body, title="手册副本"),
            make_doc("其他.txt", ["第一条 另一份文件。"])]
    assert (await store.ingest_documents(docs)).stored == 3
    same, other = text_digest(body), text_digest(["第一条 另一份文件。"])
    assert await store.documents_by_text_digest("default", [same, other, "0" * 64]) == {same: "手册.txt", other: "其他.txt"}
    assert await store.documents_by_text_digest("elsewhere", [same]) == {}
    # documents stored before the column get the same digest from migration 8's SQL as from the code
    async with store._conn() as conn:  # noqa: SLF001
        await conn.execute("UPDATE documents SET text_digest = ''")
        await conn.execute(dict(_migrations(DIM))[8][1])
    assert await fetchval(store, "SELECT text_digest FROM documents WHERE id = '手册副本.txt'") == same


def bm25_reference(corpus: dict[str, list[str]], query: list[str], k1=1.2, b=0.75) -> dict[str, float]:
    n = len(corpus)
    avgdl = sum(len(t) for t in corpus.values()) / n
    scores = {}
    for cid, terms in corpus.items():
        tf = Counter(terms)
        s = 0.0
        for term in dict.fromkeys(query):
            if tf[term]:
                df = sum(1 for t in corpus.values() if term in t)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(terms) / avgdl))
        if s:
            scores[cid] = s
    return scores


async def test_bm25_matches_hand_computed_scores(store):
    # N = 3 chunks, avgdl = (4 + 3 + 2) / 3 = 3.
    terms = {
        "A": ["劳动合同", "试用期", "试用期", "劳动者"],
        "B": ["劳动合同", "劳动者", "工资"],
        "C": ["经济补偿", "工资"],
    }
    docs = [make_doc(k, [" ".join(v)], terms=[v]) for k, v in terms.items()]
    assert (await store.ingest_documents(docs)).stored == 3
    hits = await store.keyword_search(["试用期", "劳动合同", "试用期"], 10)
    assert [h.document_id for h in hits] == ["A", "B"]
    # A: idf(试用期)=ln(1+2.5/1.5), tf=2, dl=4: 2*2.2/(2+1.2*(0.25+0.75*4/3)) = 4.4/3.5
    #    idf(劳动合同)=ln(1+1.5/2.5), tf=1: 2.2/(1+1.5) = 0.88
    a = math.log(1 + 2.5 / 1.5) * 4.4 / 3.5 + math.log(1.6) * 0.88
    b = math.log(1.6) * 1.0  # B: tf=1, dl=avgdl: 2.2/2.2
    assert a == pytest.approx(1.646646, abs=1e-6) and b == pytest.approx(0.470004, abs=1e-6)
    assert hits[0].score == pytest.approx(a, rel=1e-9)
    assert hits[1].score == pytest.approx(b, rel=1e-9)
    assert hits[0].evidence == "试用期 劳动合同" and hits[1].evidence == "劳动合同"
    assert all(h.channel == "pg.keyword" for h in hits)
    assert await store.keyword_search([], 10) == []
    assert await store.keyword_search(["试用期"], 0) == []


async def test_bm25_on_law_articles_ranks_rare_term_first(store):
    docs = [make_doc(k, [v]) for k, v in ARTICLES.items()]
    await store.ingest_documents(docs)
    query = query_keywords("试用期最长可以约定多久？劳动合同")
    assert "试用期" in query
    hits = await store.keyword_search(query, 10)
    assert hits[0].document_id == "第十九条"
    assert "试用期" in hits[0].evidence.split()
    expected = bm25_reference({d.chunks[0].id: d.chunks[0].terms for d in docs}, query)
    assert [h.chunk_id for h in hits] == sorted(expected, key=lambda c: (-expected[c], c))
    for h in hits:
        assert h.score == pytest.approx(expected[h.chunk_id], rel=1e-9)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_hostile_strings_are_plain_data(store):
    hostile = [
        "'; DROP TABLE chunks; --",
        'Robert"); DROP TABLE documents;--',
        "back\\slash\\'",
        "😀🚀",
        "%",
        "_",
        "试用期' OR '1'='1",
        "$1",
        "nul\x00byte",
        "\ud800",
        "长" * 1000,
    ]
    doc = make_doc("第十九条", [ARTICLES["第十九条"]], terms=[["试用期", *hostile[:8]]])
    assert (await store.ingest_documents([doc])).stored == 1

    assert await store.keyword_search(hostile, 10) != []  # the stored hostile terms match
    for term in hostile:
        hits = await store.keyword_search([term], 10)
        if term in hostile[:8]:
            assert [(h.chunk_id, h.evidence) for h in hits] == [("第十九条#0", term)]
        else:
            assert hits == []
    assert await store.chunks_by_ids(hostile) == []
    assert await store.document_hashes(hostile) == {}
    for table in ("documents", "chunks", "chunk_terms", "schema_migrations"):
        assert await fetchval(store, "SELECT to_regclass($1) IS NOT NULL", table), table
    assert await store.count_documents() == 1
    assert [h.chunk_id for h in await store.keyword_search(["试用期"], 5)] == ["第十九条#0"]


async def test_chunks_by_ids_keeps_request_order(store):
    await store.ingest_documents([make_doc(k, [v]) for k, v in ARTICLES.items()])
    hits = await store.chunks_by_ids(["第八十二条#0", "missing#0", "第十条#0", "第八十二条#0"])
    assert [h.chunk_id for h in hits] == ["第八十二条#0", "第十条#0"]
    assert all(h.channel == "pg.lookup" and h.score == 0.0 for h in hits)
    assert hits[1].text == ARTICLES["第十条"] and hits[1].heading_path == [LAW, "第十条"]
    assert hits[1].embedding == []


async def test_store_requires_open():
    store = PgStore("postgresql://nobody@/nowhere?host=/nonexistent", DIM)
    with pytest.raises(RuntimeError, match="not open"):
        await store.count_documents()
    with pytest.raises(ValueError):
        PgStore("postgresql://x@/y", 0)


async def _hnsw_oid(store: PgStore):
    return await fetchval(store, "SELECT to_regclass('chunks_embedding_hnsw_idx')::oid")


async def test_bulk_load_rebuilds_the_hnsw_index(store, monkeypatch):
    vecs = {"第十条": unit(1, 0, 0, 0), "第十九条": unit(0, 1, 0, 0), "第四十七条": unit(0, 0, 1, 0)}
    docs = [make_doc(k, [ARTICLES[k]], embeddings=[v]) for k, v in vecs.items()]
    before = await _hnsw_oid(store)
    assert before is not None
    async with store.bulk_load():
        assert await _hnsw_oid(store) is None
        assert (await store.ingest_documents(docs[:2])).stored == 2
        # exact scan while the index is away
        assert [h.document_id for h in await store.vector_search(unit(0.1, 1, 0, 0), 1)] == ["第十九条"]
    rebuilt = await _hnsw_oid(store)
    assert rebuilt is not None and rebuilt != before

    # Large calls (threshold lowered here) drop and rebuild the index by themselves.
    import services.retriever_pg.store as store_module

    monkeypatch.setattr(store_module, "_BULK_MIN_CHUNKS", 1)
    assert (await store.ingest_documents(docs)).stored == 1  # two unchanged, one new
    after = await _hnsw_oid(store)
    assert after is not None and after != rebuilt
    assert [h.document_id for h in await store.vector_search(unit(0, 0.1, 1, 0), 3)] == [
        "第四十七条", "第十九条", "第十条"]


def test_index_build_mem_holds_the_graph_within_floor_and_cap():
    from services.retriever_pg.store import index_build_mem_mb

    assert index_build_mem_mb(0, 384, 4096) == 64  # floor
    assert index_build_mem_mb(26_424, 384, 4096) == 81
    assert index_build_mem_mb(1_000_000, 384, 4096) == 3052  # the graph of a million fits
    assert index_build_mem_mb(1_000_000, 384, 1024) == 1024  # the operator's cap wins
    assert index_build_mem_mb(200_000, 768, 4096) > index_build_mem_mb(200_000, 384, 4096)


def test_scoped_ef_search_grows_as_the_scope_shrinks():
    from services.retriever_pg.store import scoped_ef_search

    assert scoped_ef_search(64, 10, 1.0) == 64  # the whole store: the setting
    assert scoped_ef_search(64, 100, 1.0) == 100  # never below top_k
    assert scoped_ef_search(64, 20, 0.1) == 200  # ~top_k of the first candidates in scope
    assert scoped_ef_search(64, 20, 0.5) == 64
    assert scoped_ef_search(64, 20, 0.001) == 1000  # pgvector's ceiling
    assert scoped_ef_search(64, 20, 0.0) == 1000


def test_store_refuses_a_build_cap_below_the_floor(pg_dsn):
    with pytest.raises(ValueError, match="index_build_mem_max_mb"):
        PgStore(pg_dsn, DIM, index_build_mem_max_mb=8)


async def test_hnsw_build_that_outgrows_its_memory_is_logged(store, monkeypatch, caplog):
    import services.retriever_pg.store as store_module

    rng = np.random.default_rng(3)
    docs = [make_doc(f"spill{i}", [f"第{i}段"], embeddings=[unit(*rng.standard_normal(DIM))], terms=[[f"t{i}"]])
            for i in range(3000)]
    async with store.bulk_load():
        assert (await store.ingest_documents(docs)).stored == 3000
        monkeypatch.setattr(store_module, "index_build_mem_mb", lambda rows, dim, cap: 1)  # PostgreSQL's least
        caplog.set_level("INFO", logger=store_module.__name__)
    assert await _hnsw_oid(store) is not None
    built = [r.getMessage() for r in caplog.records if "built HNSW index" in r.getMessage()]
    assert built and "maintenance_work_mem 1 MB" in built[0]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("no longer fits" in w and "INDEX_BUILD_MEM_MAX_MB" in w for w in warnings), warnings


async def test_migrate_restores_a_missing_hnsw_index(store):
    await fetchval(store, "DROP INDEX chunks_embedding_hnsw_idx")
    assert await _hnsw_oid(store) is None
    assert await store.migrate() == []
    assert await _hnsw_oid(store) is not None


async def test_an_ingest_after_a_failed_bulk_rebuild_restores_the_hnsw_index(store):
    # PostgreSQL died during a bulk load, after the index was dropped: the
    # rebuild at its end failed, and the re-run is too small for the bulk
    # path (crash trials, issue 16, bug #13).
    await fetchval(store, "DROP INDEX chunks_embedding_hnsw_idx")
    doc = make_doc("第十条", [ARTICLES["第十条"]], embeddings=[unit(1, 0, 0, 0)])
    assert (await store.ingest_documents([doc])).stored == 1
    assert await _hnsw_oid(store) is not None
    # also when nothing new is stored
    await fetchval(store, "DROP INDEX chunks_embedding_hnsw_idx")
    assert (await store.ingest_documents([doc])).unchanged == 1
    assert await _hnsw_oid(store) is not None
