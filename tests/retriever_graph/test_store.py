"""GraphStore against a real Neo4j 5.26 (embedded launcher or GRAPHMESH_TEST_NEO4J_URI).

The inputs are real articles of the PRC Labour Contract Law and Civil Code,
as they appear in /work/shared/data/law-zh (ids are that corpus's ids).
"""
from __future__ import annotations

import dataclasses

import pytest

from services.ingest.chunking import ChunkingConfig, chunk_document
from services.common.records import DocumentRecord
from services.common.text import query_keywords
from services.retriever_graph.store import (
    CHUNK_INDEX,
    FULLTEXT_ANALYZER,
    HEADING_INDEX,
    GraphStore,
    escape_lucene,
)

pytestmark = pytest.mark.integration

LABOUR = "中华人民共和国劳动合同法"
CIVIL = "中华人民共和国民法典"

# (id, law, chapter, section, article, text)
ARTICLES = [
    ("5608", LABOUR, "第一章 总则", None, "第一条",
     "为了完善劳动合同制度，明确劳动合同双方当事人的权利和义务，保护劳动者的合法权益，构建和发展和谐稳定的劳动关系，制定本法。"),
    ("5609", LABOUR, "第一章 总则", None, "第二条",
     "中华人民共和国境内的企业、个体经济组织、民办非企业单位等组织（以下称用人单位）与劳动者建立劳动关系，订立、履行、变更、解除或者终止劳动合同，适用本法。\n"
     "国家机关、事业单位、社会团体和与其建立劳动关系的劳动者，订立、履行、变更、解除或者终止劳动合同，依照本法执行。"),
    ("5610", LABOUR, "第一章 总则", None, "第三条",
     "订立劳动合同，应当遵循合法、公平、平等自愿、协商一致、诚实信用的原则。\n依法订立的劳动合同具有约束力，用人单位与劳动者应当履行劳动合同约定的义务。"),
    ("5614", LABOUR, "第二章 劳动合同的订立", None, "第七条",
     "用人单位自用工之日起即与劳动者建立劳动关系。用人单位应当建立职工名册备查。"),
    ("5615", LABOUR, "第二章 劳动合同的订立", None, "第八条",
     "用人单位招用劳动者时，应当如实告知劳动者工作内容、工作条件、工作地点、职业危害、安全生产状况、劳动报酬，以及劳动者要求了解的其他情况；"
     "用人单位有权了解劳动者与劳动合同直接相关的基本情况，劳动者应当如实说明。"),
    ("5616", LABOUR, "第二章 劳动合同的订立", None, "第九条",
     "用人单位招用劳动者，不得扣押劳动者的居民身份证和其他证件，不得要求劳动者提供担保或者以其他名义向劳动者收取财物。"),
    ("5617", LABOUR, "第二章 劳动合同的订立", None, "第十条",
     "建立劳动关系，应当订立书面劳动合同。\n已建立劳动关系，未同时订立书面劳动合同的，应当自用工之日起一个月内订立书面劳动合同。\n"
     "用人单位与劳动者在用工前订立劳动合同的，劳动关系自用工之日起建立。"),
    ("5658", LABOUR, "第五章 特别规定", "第一节 集体合同", "第五十一条",
     "企业职工一方与用人单位通过平等协商，可以就劳动报酬、工作时间、休息休假、劳动安全卫生、保险福利等事项订立集体合同。"
     "集体合同草案应当提交职工代表大会或者全体职工讨论通过。\n"
     "集体合同由工会代表企业职工一方与用人单位订立；尚未建立工会的用人单位，由上级工会指导劳动者推举的代表与用人单位订立。"),
    ("5659", LABOUR, "第五章 特别规定", "第一节 集体合同", "第五十二条",
     "企业职工一方与用人单位可以订立劳动安全卫生、女职工权益保护、工资调整机制等专项集体合同。"),
    ("13040", CIVIL, "第一章 基本规定", None, "第一条",
     "为了保护民事主体的合法权益，调整民事关系，维护社会和经济秩序，适应中国特色社会主义发展要求，弘扬社会主义核心价值观，根据宪法，制定本法。"),
    ("13041", CIVIL, "第一章 基本规定", None, "第二条",
     "民法调整平等主体的自然人、法人和非法人组织之间的人身关系和财产关系。"),
    ("13042", CIVIL, "第一章 基本规定", None, "第三条",
     "民事主体的人身权利、财产权利以及其他合法权益受法律保护，任何组织或者个人不得侵犯。"),
    ("13405", CIVIL, "第十四章 居住权", None, "第三百六十六条",
     "居住权人有权按照合同约定，对他人的住宅享有占有、使用的用益物权，以满足生活居住的需要。"),
    ("13406", CIVIL, "第十四章 居住权", None, "第三百六十七条",
     "设立居住权，当事人应当采用书面形式订立居住权合同。\n居住权合同一般包括下列条款：\n（一）当事人的姓名或者名称和住所；\n"
     "（二）住宅的位置；\n（三）居住的条件和要求；\n（四）居住权期限；\n（五）解决争议的方法。"),
    ("13407", CIVIL, "第十四章 居住权", None, "第三百六十八条",
     "居住权无偿设立，但是当事人另有约定的除外。设立居住权的，应当向登记机构申请居住权登记。居住权自登记时设立。"),
]
# Chunked small so that one document has several chunks (NEXT edges).
MULTI_CHUNK_ID = "5609"

EXPECTED_HEADINGS = {
    LABOUR: (LABOUR, 1),
    f"{LABOUR}/第一章 总则": ("第一章 总则", 2),
    f"{LABOUR}/第二章 劳动合同的订立": ("第二章 劳动合同的订立", 2),
    f"{LABOUR}/第五章 特别规定": ("第五章 特别规定", 2),
    f"{LABOUR}/第五章 特别规定/第一节 集体合同": ("第一节 集体合同", 3),
    CIVIL: (CIVIL, 1),
    f"{CIVIL}/第一章 基本规定": ("第一章 基本规定", 2),
    f"{CIVIL}/第十四章 居住权": ("第十四章 居住权", 2),
}
EXPECTED_HEADING_EDGES = {
    (LABOUR, f"{LABOUR}/第一章 总则"),
    (LABOUR, f"{LABOUR}/第二章 劳动合同的订立"),
    (LABOUR, f"{LABOUR}/第五章 特别规定"),
    (f"{LABOUR}/第五章 特别规定", f"{LABOUR}/第五章 特别规定/第一节 集体合同"),
    (CIVIL, f"{CIVIL}/第一章 基本规定"),
    (CIVIL, f"{CIVIL}/第十四章 居住权"),
}


def make_doc(doc_id: str, law: str, chapter: str | None, section: str | None, article: str, text: str) -> DocumentRecord:
    path = [p for p in (law, chapter, section, article) if p]
    config = ChunkingConfig(60, 0) if doc_id == MULTI_CHUNK_ID else ChunkingConfig()
    record = chunk_document(doc_id, law, path, text, {"status": "现行有效"}, config)
    record.domain_pack = "law_zh"  # statutes: a law is also found by its name without 中华人民共和国
    return record


def corpus() -> list[DocumentRecord]:
    return [make_doc(*a) for a in ARTICLES]


def parent_heading(doc: DocumentRecord) -> str:
    return "/".join(doc.heading_path[:-1])


async def q(store: GraphStore, query: str, **params) -> list[dict]:
    result = await store.driver.execute_query(query, parameters_=params, database_=store.database)
    return [r.data() for r in result.records]


async def scalar(store: GraphStore, query: str, **params):
    rows = await q(store, query, **params)
    return next(iter(rows[0].values()))


#: Edge types of the document graph (services.retriever_graph.doc_graph).
DOC_GRAPH_EDGES = ("AT", "REFERS", "CITES", "AMENDS", "VERSION_OF", "DEFINES", "MENTIONS")


async def graph_counts(store: GraphStore) -> dict[str, int]:
    return {
        "headings": await scalar(store, "MATCH (h:Heading) RETURN count(h)"),
        "documents": await scalar(store, "MATCH (d:Document) RETURN count(d)"),
        "chunks": await scalar(store, "MATCH (c:Chunk) RETURN count(c)"),
        "heading_edges": await scalar(store, "MATCH (:Heading)-[r:PARENT_OF]->(:Heading) RETURN count(r)"),
        "parent_edges": await scalar(store, "MATCH (:Heading)-[r:PARENT_OF]->(:Document) RETURN count(r)"),
        "has_chunk": await scalar(store, "MATCH (:Document)-[r:HAS_CHUNK]->(:Chunk) RETURN count(r)"),
        "next": await scalar(store, "MATCH (:Chunk)-[r:NEXT]->(:Chunk) RETURN count(r)"),
        # Everything but the document graph (doc_graph: its own tests).
        "all_nodes": await scalar(store, "MATCH (n) WHERE NOT (n:ArticleKey OR n:Term OR n:GraphMeta OR n:Collection) RETURN count(n)"),
        "all_edges": await scalar(store, "MATCH ()-[r]->() WHERE NOT type(r) IN $doc_graph RETURN count(r)",
                                  doc_graph=list(DOC_GRAPH_EDGES)),
    }


def expected_counts(docs: list[DocumentRecord]) -> dict[str, int]:
    chunks = sum(len(d.chunks) for d in docs)
    counts = {
        "headings": len(EXPECTED_HEADINGS),
        "documents": len(docs),
        "chunks": chunks,
        "heading_edges": len(EXPECTED_HEADING_EDGES),
        "parent_edges": len(docs),
        "has_chunk": chunks,
        "next": sum(len(d.chunks) - 1 for d in docs),
    }
    counts["all_nodes"] = counts["headings"] + counts["documents"] + counts["chunks"]
    counts["all_edges"] = counts["heading_edges"] + counts["parent_edges"] + counts["has_chunk"] + counts["next"]
    return counts


@pytest.fixture
async def loaded(graph_store: GraphStore) -> GraphStore:
    result = await graph_store.ingest_documents(corpus())
    assert result.failures == []
    assert result.stored == len(ARTICLES)
    return graph_store


# -- schema -------------------------------------------------------------------


async def test_migrate_is_idempotent_and_uses_cjk(graph_store: GraphStore) -> None:
    async def schema() -> tuple[set, dict]:
        constraints = {
            (tuple(r["labelsOrTypes"]), tuple(r["properties"]), r["type"])
            for r in await q(graph_store, "SHOW CONSTRAINTS YIELD labelsOrTypes, properties, type")
        }
        fulltext = {
            r["name"]: (tuple(r["labelsOrTypes"]), tuple(r["properties"]), r["options"]["indexConfig"]["fulltext.analyzer"], r["state"])
            for r in await q(
                graph_store,
                "SHOW INDEXES YIELD name, type, labelsOrTypes, properties, options, state "
                "WHERE type = 'FULLTEXT' AND name IN $names RETURN *",
                names=[CHUNK_INDEX, HEADING_INDEX],
            )
        }
        return constraints, fulltext

    # As on a new store: the fixture keeps indexes an earlier test's search built.
    await q(graph_store, f"DROP INDEX {CHUNK_INDEX} IF EXISTS")
    await graph_store.migrate()
    migrated = await schema()
    constraints, fulltext = migrated
    for label in ("Document", "Chunk", "Heading"):
        assert ((label,), ("id",), "UNIQUENESS") in constraints
    # The chunks' index waits for the first search that needs it.
    assert fulltext == {HEADING_INDEX: (("Heading",), ("name",), FULLTEXT_ANALYZER, "ONLINE")}

    await graph_store.ensure_chunk_index()
    before = await schema()
    assert before[1] == {
        CHUNK_INDEX: (("Chunk",), ("search_text",), FULLTEXT_ANALYZER, "ONLINE"),
        HEADING_INDEX: (("Heading",), ("name",), FULLTEXT_ANALYZER, "ONLINE"),
    }
    await graph_store.migrate()
    await graph_store.migrate()
    assert await schema() == before

    # An index left with another analyzer is replaced.
    await q(graph_store, f"DROP INDEX {HEADING_INDEX}")
    await q(
        graph_store,
        f"CREATE FULLTEXT INDEX {HEADING_INDEX} FOR (h:Heading) ON EACH [h.name] "
        "OPTIONS {indexConfig: {`fulltext.analyzer`: 'standard-no-stop-words'}}",
    )
    await graph_store.migrate()
    assert await schema() == before
    # The chunks' index too: dropped at migrate, rebuilt by the next search.
    await q(graph_store, f"DROP INDEX {CHUNK_INDEX}")
    await q(
        graph_store,
        f"CREATE FULLTEXT INDEX {CHUNK_INDEX} FOR (c:Chunk) ON EACH [c.search_text] "
        "OPTIONS {indexConfig: {`fulltext.analyzer`: 'standard-no-stop-words'}}",
    )
    await graph_store.migrate()
    assert await schema() == migrated
    await graph_store.retrieve("居住权", ["居住权"], 5)
    assert await schema() == before

    # Uniqueness is enforced.
    await q(graph_store, "CREATE (:Document {id: 'x'})")
    with pytest.raises(Exception, match="already exists"):
        await q(graph_store, "CREATE (:Document {id: 'x'})")


# -- ingestion ----------------------------------------------------------------


async def test_ingest_builds_heading_document_chunk_graph(loaded: GraphStore) -> None:
    docs = corpus()
    by_id = {d.id: d for d in docs}
    assert len(by_id[MULTI_CHUNK_ID].chunks) >= 2
    assert await graph_counts(loaded) == expected_counts(docs)

    headings = {
        r["id"]: (r["name"], r["level"])
        for r in await q(loaded, "MATCH (h:Heading) RETURN h.id AS id, h.name AS name, h.level AS level")
    }
    assert headings == EXPECTED_HEADINGS
    edges = {
        (r["p"], r["c"])
        for r in await q(loaded, "MATCH (p:Heading)-[:PARENT_OF]->(c:Heading) RETURN p.id AS p, c.id AS c")
    }
    assert edges == EXPECTED_HEADING_EDGES

    # Each document hangs under its deepest heading; the article is not a heading.
    parents = {
        r["d"]: r["h"]
        for r in await q(loaded, "MATCH (h:Heading)-[:PARENT_OF]->(d:Document) RETURN h.id AS h, d.id AS d")
    }
    assert parents == {d.id: parent_heading(d) for d in docs}
    assert parents["5658"] == f"{LABOUR}/第五章 特别规定/第一节 集体合同"
    assert await scalar(loaded, "MATCH (h:Heading) WHERE h.name STARTS WITH '第' AND h.name ENDS WITH '条' RETURN count(h)") == 0

    row = (await q(
        loaded,
        "MATCH (d:Document {id: $id}) RETURN d.title AS title, d.content_hash AS hash, d.heading_path AS path",
        id="5617",
    ))[0]
    assert row == {"title": LABOUR, "hash": by_id["5617"].content_hash, "path": [LABOUR, "第二章 劳动合同的订立", "第十条"]}

    # Chunks: searchable text = headings + text; NEXT follows the ordinals.
    chunks = await q(
        loaded,
        "MATCH (d:Document {id: $id})-[:HAS_CHUNK]->(c:Chunk) "
        "RETURN c.id AS id, c.ordinal AS ordinal, c.text AS text, c.search_text AS search_text, "
        "c.document_id AS document_id ORDER BY c.ordinal",
        id=MULTI_CHUNK_ID,
    )
    expected = by_id[MULTI_CHUNK_ID].chunks
    assert [c["id"] for c in chunks] == [c.id for c in expected]
    assert [c["text"] for c in chunks] == [c.text for c in expected]
    assert all(c["document_id"] == MULTI_CHUNK_ID for c in chunks)
    assert chunks[0]["search_text"] == f"{LABOUR} 第一章 总则 第二条\n{expected[0].text}"
    next_pairs = await q(
        loaded,
        "MATCH (a:Chunk {document_id: $id})-[:NEXT]->(b:Chunk) RETURN a.ordinal AS a, b.ordinal AS b ORDER BY a",
        id=MULTI_CHUNK_ID,
    )
    assert [(r["a"], r["b"]) for r in next_pairs] == [(i, i + 1) for i in range(len(expected) - 1)]

    # Positions follow ingestion order under each heading.
    rows = await q(
        loaded,
        "MATCH (h:Heading {id: $h})-[:PARENT_OF]->(d:Document) RETURN d.id AS id ORDER BY d.position",
        h=f"{LABOUR}/第二章 劳动合同的订立",
    )
    assert [r["id"] for r in rows] == ["5614", "5615", "5616", "5617"]

    assert await loaded.count_documents() == len(docs)
    assert await loaded.document_hashes(["5617", "13407", "missing"]) == {
        "5617": by_id["5617"].content_hash,
        "13407": by_id["13407"].content_hash,
    }


async def test_reingest_unchanged_writes_nothing(loaded: GraphStore) -> None:
    before = await graph_counts(loaded)
    chunk_nodes = {r["id"]: r["eid"] for r in await q(loaded, "MATCH (c:Chunk) RETURN c.id AS id, elementId(c) AS eid")}

    result = await loaded.ingest_documents(corpus())

    assert (result.stored, result.unchanged, result.failures) == (0, len(ARTICLES), [])
    assert await graph_counts(loaded) == before
    after = {r["id"]: r["eid"] for r in await q(loaded, "MATCH (c:Chunk) RETURN c.id AS id, elementId(c) AS eid")}
    assert after == chunk_nodes


async def test_changed_document_replaces_its_chunks(loaded: GraphStore) -> None:
    docs = corpus()
    old = next(d for d in docs if d.id == MULTI_CHUNK_ID)
    position = await scalar(loaded, "MATCH (d:Document {id: $id}) RETURN d.position", id=MULTI_CHUNK_ID)
    new_text = "本法适用于境内用人单位与劳动者之间的劳动关系，修订后仅此一句。"
    changed = make_doc(MULTI_CHUNK_ID, LABOUR, "第一章 总则", None, "第二条", new_text)
    assert changed.content_hash != old.content_hash and len(changed.chunks) == 1

    result = await loaded.ingest_documents([d if d.id != MULTI_CHUNK_ID else changed for d in docs])

    assert (result.stored, result.unchanged, result.failures) == (1, len(ARTICLES) - 1, [])
    texts = [
        r["text"]
        for r in await q(
            loaded, "MATCH (:Document {id: $id})-[:HAS_CHUNK]->(c:Chunk) RETURN c.text AS text", id=MULTI_CHUNK_ID
        )
    ]
    assert texts == [new_text]
    # The old chunks are gone entirely, not just detached.
    assert await scalar(loaded, "MATCH (c:Chunk {document_id: $id}) RETURN count(c)", id=MULTI_CHUNK_ID) == 1
    assert await scalar(loaded, "MATCH (c:Chunk) WHERE c.text CONTAINS '社会团体' RETURN count(c)") == 0
    assert await loaded.document_hashes([MULTI_CHUNK_ID]) == {MULTI_CHUNK_ID: changed.content_hash}
    assert await scalar(loaded, "MATCH (d:Document {id: $id}) RETURN d.position", id=MULTI_CHUNK_ID) == position
    assert await graph_counts(loaded) == expected_counts([d if d.id != MULTI_CHUNK_ID else changed for d in docs])
    hits = await loaded.retrieve("修订后", ["修订后"], 5)
    assert [(h.chunk_id, h.channel) for h in hits if h.channel != "graph.neighbour"] == [
        (f"{MULTI_CHUNK_ID}#0", "graph.fulltext")
    ]
    assert {h.chunk_id for h in hits if h.channel == "graph.neighbour"} == {"5608#0", "5610#0"}


async def test_document_moved_to_another_heading(loaded: GraphStore) -> None:
    moved = make_doc("5659", LABOUR, "第二章 劳动合同的订立", None, "第五十二条", ARTICLES[8][5])
    result = await loaded.ingest_documents([moved])
    assert (result.stored, result.unchanged) == (1, 0)
    parents = [r["h"] for r in await q(loaded, "MATCH (h:Heading)-[:PARENT_OF]->(:Document {id: '5659'}) RETURN h.id AS h")]
    assert parents == [f"{LABOUR}/第二章 劳动合同的订立"]
    rows = await q(
        loaded,
        "MATCH (:Heading {id: $h})-[:PARENT_OF]->(d:Document) RETURN d.id AS id ORDER BY d.position",
        h=f"{LABOUR}/第二章 劳动合同的订立",
    )
    assert [r["id"] for r in rows] == ["5614", "5615", "5616", "5617", "5659"]


async def test_bad_document_is_reported_and_the_rest_stored(graph_store: GraphStore) -> None:
    graph_store.batch_size = 4
    docs = corpus()
    bad = docs[5]
    # Two chunks with one id violate the Chunk.id uniqueness constraint.
    bad.chunks.append(dataclasses.replace(bad.chunks[0], ordinal=1))

    result = await graph_store.ingest_documents(docs)

    assert [(f.index, f.id) for f in result.failures] == [(5, bad.id)]
    assert "already exists" in result.failures[0].reason
    assert result.stored == len(docs) - 1
    stored = await graph_store.document_hashes([d.id for d in docs])
    assert set(stored) == {d.id for d in docs} - {bad.id}
    # The failed document left nothing behind.
    assert await scalar(graph_store, "MATCH (c:Chunk {document_id: $id}) RETURN count(c)", id=bad.id) == 0


# -- retrieval ----------------------------------------------------------------


async def test_cjk_fulltext_finds_a_word_inside_chinese_text(loaded: GraphStore) -> None:
    # "扣押" and "身份证" sit mid-sentence in 第九条; no segmentation was stored.
    await loaded.ensure_chunk_index()
    rows = await q(
        loaded,
        "CALL db.index.fulltext.queryNodes($index, $q) YIELD node RETURN node.id AS id",
        index=CHUNK_INDEX,
        q='"身份证"',
    )
    assert [r["id"] for r in rows] == ["5616#0"]

    hits = await loaded.retrieve("用人单位可以扣押员工身份证吗", ["扣押", "身份证"], 5)
    assert hits[0].chunk_id == "5616#0"
    assert hits[0].channel == "graph.fulltext"
    assert hits[0].evidence == "扣押 身份证"
    assert hits[0].document_id == "5616" and hits[0].title == LABOUR
    assert hits[0].heading_path == [LABOUR, "第二章 劳动合同的订立", "第九条"]
    assert hits[0].score > 0

    # A keyword is a phrase: its characters must be adjacent ("扣证" is not).
    assert await loaded.retrieve("扣证", ["扣证"], 5) == []
    # The headings are searchable too: 居住权 is a chapter name and inside the text.
    found = {h.document_id for h in await loaded.retrieve("居住权", ["居住权"], 10)}
    assert {"13405", "13406", "13407"} <= found
    assert not found & {"5608", "5616", "13040"}


async def test_query_naming_a_law_finds_its_articles_via_heading(loaded: GraphStore) -> None:
    query = "劳动合同法第十条规定了什么"
    hits = await loaded.retrieve(query, query_keywords(query), 5)
    assert hits[0].chunk_id == "5617#0"
    assert hits[0].channel == "graph.heading"
    assert hits[0].evidence == f"heading:{LABOUR}"
    heading_hits = [h for h in hits if h.channel == "graph.heading"]
    assert heading_hits and all(h.title == LABOUR for h in heading_hits)

    query = "民法典关于设立居住权的规定"
    hits = await loaded.retrieve(query, query_keywords(query), 5)
    top3 = {h.document_id for h in hits[:3]}
    assert top3 == {"13405", "13406", "13407"}
    assert all(h.channel == "graph.heading" and h.evidence == f"heading:{CIVIL}" for h in hits[:3])
    assert all(h.title == CIVIL for h in hits if h.channel == "graph.heading")

    # The same keywords without the law in the query: no exact heading, so
    # chunk full-text alone ranks, and labour-law chunks are not "heading" hits.
    hits = await loaded.retrieve("书面劳动合同", ["书面"], 5)
    assert hits[0].document_id == "5617" and hits[0].channel == "graph.fulltext"


async def test_switched_off_channel_is_not_run_and_drops_nothing_else(loaded: GraphStore) -> None:
    query = "劳动合同法第十条规定了什么"
    keywords = query_keywords(query)
    every = await loaded.retrieve(query, keywords, 5)
    assert {h.channel for h in every} >= {"graph.heading", "graph.neighbour"}
    # Without graph.heading, the chunks it found come back through full text.
    no_heading = await loaded.retrieve(query, keywords, 5, channels=["graph.fulltext", "graph.neighbour"])
    assert "graph.heading" not in {h.channel for h in no_heading}
    assert "5617#0" in {h.chunk_id for h in no_heading if h.channel == "graph.fulltext"}
    # Neighbours only come from the channels that ran.
    only_fulltext = await loaded.retrieve(query, keywords, 5, channels=["graph.fulltext"])
    assert only_fulltext and {h.channel for h in only_fulltext} == {"graph.fulltext"}
    only_heading = await loaded.retrieve(query, keywords, 5, channels=["graph.heading"])
    assert only_heading and {h.channel for h in only_heading} == {"graph.heading"}
    assert await loaded.retrieve(query, keywords, 5, channels=["graph.neighbour"]) == []


async def test_law_name_inside_the_query_text_selects_the_heading(loaded: GraphStore) -> None:
    insurance = "中华人民共和国保险法"
    social = "中华人民共和国社会保险法"
    extra = [
        make_doc("1942", insurance, "第一章 总则", None, "第一条",
                 "为了规范保险活动，保护保险活动当事人的合法权益，加强对保险业的监督管理，维护社会经济秩序和社会公共利益，"
                 "促进保险事业的健康发展，制定本法。"),
        make_doc("20528", social, "第一章 总则", None, "第一条",
                 "为了规范社会保险关系，维护公民参加社会保险和享受社会保险待遇的合法权益，使公民共享发展成果，"
                 "促进社会和谐稳定，根据宪法，制定本法。"),
    ]
    assert (await loaded.ingest_documents(extra)).stored == 2

    # The law is named only in the query text (short name, no keyword for it).
    hits = await loaded.retrieve("社会保险法第一条", ["第一条"], 5)
    by_doc = {h.document_id: h for h in hits}
    assert hits[0].document_id == "20528"
    assert (hits[0].channel, hits[0].evidence) == ("graph.heading", f"heading:{social}")
    # 保险法 is inside 社会保险法: the query does not name it.
    assert by_doc["1942"].channel == "graph.fulltext"
    assert by_doc["5608"].channel == "graph.fulltext"
    assert all(h.document_id == "20528" for h in hits if h.channel == "graph.heading")


async def test_neighbouring_articles_and_chunks(loaded: GraphStore) -> None:
    # 第八条 alone mentions 如实告知; its neighbours are 第七条 and 第九条.
    hits = await loaded.retrieve("如实告知", ["如实告知"], 5)
    by_chunk = {h.chunk_id: h for h in hits}
    source = by_chunk["5615#0"]
    assert source.channel == "graph.fulltext"
    for neighbour in ("5614#0", "5616#0"):
        hit = by_chunk[neighbour]
        assert hit.channel == "graph.neighbour"
        assert hit.evidence == "neighbour-of:5615#0"
        assert hit.score == pytest.approx(0.5 * source.score)
    assert len(hits) == 3

    # 第七条 opens its chapter: its only neighbour is 第八条, not 第一章's 第三条.
    hits = await loaded.retrieve("职工名册", ["职工名册"], 5)
    assert [(h.chunk_id, h.channel) for h in hits] == [("5614#0", "graph.fulltext"), ("5615#0", "graph.neighbour")]

    # Inside a multi-chunk document the neighbours are the adjacent chunks.
    doc = make_doc(*ARTICLES[1])
    first, second = doc.chunks[0], doc.chunks[1]
    hits = await loaded.retrieve("个体经济组织", ["个体经济组织"], 5)
    by_chunk = {h.chunk_id: h for h in hits}
    assert by_chunk[first.id].channel == "graph.fulltext"
    assert by_chunk[second.id].channel == "graph.neighbour"
    assert by_chunk[second.id].evidence == f"neighbour-of:{first.id}"
    # The first chunk of 第二条 also neighbours the last chunk of 第一条.
    assert by_chunk["5608#0"].channel == "graph.neighbour"


async def test_results_are_deduplicated_and_capped(loaded: GraphStore) -> None:
    query = "劳动合同法中用人单位与劳动者订立劳动合同"
    for top_k in (1, 3, 50):
        hits = await loaded.retrieve(query, query_keywords(query), top_k)
        assert 0 < len(hits) <= 2 * top_k
        ids = [h.chunk_id for h in hits]
        assert len(ids) == len(set(ids))
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(await loaded.retrieve(query, query_keywords(query), 50)) > 6


async def test_no_keywords_returns_nothing(loaded: GraphStore) -> None:
    assert await loaded.retrieve("劳动合同法", [], 5) == []
    assert await loaded.retrieve("劳动合同法", ["  ", ""], 5) == []
    assert await loaded.retrieve("劳动合同法", ["劳动合同"], 0) == []


HOSTILE = [
    "'; DROP TABLE documents; --",
    "MATCH (n) DETACH DELETE n",
    "\") MATCH (n) DETACH DELETE n //",
    "'quoted' \"double\"",
    "back\\slash \\\\ \\",
    "a:b AND (c",
    "title:* OR *:*",
    "+劳动 -合同 && || ! ( ) { } [ ] ^ \" ~ * ? : \\ /",
    "劳动合同~0.5^10",
    "😀🔥 emoji 劳动者",
    "NOT",
    "$id {id}",
]


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_hostile_strings_are_searched_as_text(loaded: GraphStore, hostile: str) -> None:
    before = await graph_counts(loaded)
    stored = {r["id"] for r in (await loaded.driver.execute_query("MATCH (c:Chunk) RETURN c.id AS id", database_=loaded.database)).records}
    hits = await loaded.retrieve(hostile, [hostile], 5)
    assert {h.chunk_id for h in hits} <= stored  # stored chunks only, matched as text
    mixed = await loaded.retrieve(hostile + " 居住权", [hostile, "居住权"], 5)
    assert any(h.document_id == "13405" or h.document_id == "13406" for h in mixed)
    assert await graph_counts(loaded) == before


async def test_hostile_strings_stored_and_found_verbatim(loaded: GraphStore) -> None:
    text = "测试条文：a:b AND (c 与 'x' OR \"y\" \\ 😀 MATCH (n) DETACH DELETE n"
    doc = chunk_document("evil'\") DETACH DELETE n //", "a:b AND (c", ["a:b AND (c", "第一条"], text, {}, ChunkingConfig())
    result = await loaded.ingest_documents([doc])
    assert (result.stored, result.failures) == (1, [])
    assert await loaded.count_documents() == len(ARTICLES) + 1

    hits = await loaded.retrieve("a:b AND (c", ["a:b AND (c"], 5)
    assert hits and hits[0].document_id == doc.id
    assert hits[0].text == text
    assert hits[0].channel == "graph.heading" and hits[0].evidence == "heading:a:b AND (c"
    assert (await loaded.retrieve("😀", ["😀"], 5))[0].document_id == doc.id


def test_escape_lucene() -> None:
    assert escape_lucene('a:b AND (c') == r"a\:b AND \(c"
    assert escape_lucene('+-&|!(){}[]^"~*?:\\/') == r'\+\-\&\|\!\(\)\{\}\[\]\^\"\~\*\?\:\\\/'
    assert escape_lucene("劳动合同") == "劳动合同"


async def test_a_chunk_index_dropped_behind_the_stores_back_is_built_again(loaded: GraphStore) -> None:
    assert await loaded.retrieve("居住权", ["居住权"], 5)
    await q(loaded, f"DROP INDEX {CHUNK_INDEX}")
    # The store believed it online; its next search finds it gone, builds it and answers.
    found = {h.document_id for h in await loaded.retrieve("居住权", ["居住权"], 10)}
    assert {"13405", "13406", "13407"} <= found
    assert await q(loaded, "SHOW INDEXES YIELD name, state WHERE name = $name RETURN state", name=CHUNK_INDEX) == [
        {"state": "ONLINE"}]
