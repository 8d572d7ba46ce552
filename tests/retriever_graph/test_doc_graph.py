"""The document graph in a real Neo4j 5.26: cross-references, amendments,
defined terms and versions built at ingestion from real articles of
/work/shared/data/law-zh (ids are that corpus's ids)."""
from __future__ import annotations

import pytest

from services.common.records import DocumentRecord
from services.ingest.chunking import ChunkingConfig, chunk_document
from domains.facts import DOCGRAPH_VERSION
from services.retriever_graph.doc_graph import dangling_references

pytestmark = pytest.mark.integration

CRIMINAL = "中华人民共和国刑法"
AMENDMENT_11 = "中华人民共和国刑法修正案（十一）"
MARITIME = "中华人民共和国海商法"
AMENDED = "已被修改"
CURRENT = "现行有效"
HISTORICAL = "历史版本"

# (id, law, chapter, article, status, text)
ARTICLES = [
    ("4777", CRIMINAL, "第四章 刑罚的具体运用", "第六十七条", AMENDED,
     "犯罪以后自动投案，如实供述自己的罪行的，是自首。对于自首的犯罪分子，可以从轻或者减轻处罚。其中，犯罪较轻的，可以免除处罚。\n"
     "被采取强制措施的犯罪嫌疑人、被告人和正在服刑的罪犯，如实供述司法机关还未掌握的本人其他罪行的，以自首论。\n"
     "犯罪嫌疑人虽不具有前两款规定的自首情节，但是如实供述自己罪行的，可以从轻处罚；因其如实供述自己罪行，避免特别严重后果发生的，可以减轻处罚。"),
    ("4850", CRIMINAL, "第二章 危害公共安全罪", "第一百三十三条之一", AMENDED,
     "在道路上驾驶机动车，有下列情形之一的，处拘役，并处罚金：\n（一）追逐竞驶，情节恶劣的；\n（二）醉酒驾驶机动车的；\n"
     "（三）从事校车业务或者旅客运输，严重超过额定乘员载客，或者严重超过规定时速行驶的；\n"
     "（四）违反危险化学品安全管理规定运输危险化学品，危及公共安全的。\n"
     "机动车所有人、管理人对前款第三项、第四项行为负有直接责任的，依照前款的规定处罚。\n"
     "有前两款行为，同时构成其他犯罪的，依照处罚较重的规定定罪处罚。"),
    ("4851", CRIMINAL, "第二章 危害公共安全罪", "第一百三十三条之二", AMENDED,
     "对行驶中的公共交通工具的驾驶人员使用暴力或者抢控驾驶操纵装置，干扰公共交通工具正常行驶，危及公共安全的，处一年以下有期徒刑、拘役或者管制，并处或者单处罚金。\n"
     "前款规定的驾驶人员在行驶的公共交通工具上擅离职守，与他人互殴或者殴打他人，危及公共安全的，依照前款的规定处罚。\n"
     "有前两款行为，同时构成其他犯罪的，依照处罚较重的规定定罪处罚。"),
    ("4873", CRIMINAL, "第三章 破坏社会主义市场经济秩序罪", "第一百五十一条", AMENDED,
     "走私武器、弹药、核材料或者伪造的货币的，处七年以上有期徒刑，并处罚金或者没收财产；情节特别严重的，处无期徒刑，并处没收财产；情节较轻的，处三年以上七年以下有期徒刑，并处罚金。"),
    ("4874", CRIMINAL, "第三章 破坏社会主义市场经济秩序罪", "第一百五十二条", AMENDED,
     "以牟利或者传播为目的，走私淫秽的影片、录像带、录音带、图片、书刊或者其他淫秽物品的，处三年以上十年以下有期徒刑，并处罚金；情节严重的，处十年以上有期徒刑或者无期徒刑，并处罚金或者没收财产；情节较轻的，处三年以下有期徒刑、拘役或者管制，并处罚金。"),
    ("4875", CRIMINAL, "第三章 破坏社会主义市场经济秩序罪", "第一百五十三条", AMENDED,
     "走私本法第一百五十一条、第一百五十二条、第三百四十七条规定以外的货物、物品的，根据情节轻重，分别依照下列规定处罚：\n"
     "（一）走私货物、物品偷逃应缴税额较大或者一年内曾因走私被给予二次行政处罚后又走私的，处三年以下有期徒刑或者拘役，并处偷逃应缴税额一倍以上五倍以下罚金。"),
    ("5376", AMENDMENT_11, None, "条目二", CURRENT,
     "在刑法第一百三十三条之一后增加一条，作为第一百三十三条之二：\"对行驶中的公共交通工具的驾驶人员使用暴力或者抢控驾驶操纵装置，干扰公共交通工具正常行驶，危及公共安全的，处一年以下有期徒刑、拘役或者管制，并处或者单处罚金。\n"
     "\"前款规定的驾驶人员在行驶的公共交通工具上擅离职守，与他人互殴或者殴打他人，危及公共安全的，依照前款的规定处罚。\n"
     "\"有前两款行为，同时构成其他犯罪的，依照处罚较重的规定定罪处罚。\""),
    ("16100", MARITIME, "第一章 总则", "第二条", HISTORICAL,
     "本法所称海上运输，是指海上货物运输和海上旅客运输，包括海江之间、江海之间的直达运输。\n"
     "本法第四章海上货物运输合同的规定，不适用于中华人民共和国港口之间的海上货物运输。"),
    ("16378", MARITIME, "第一章 总则", "第二条", CURRENT,
     "本法所称海上运输，是指海上货物运输和海上旅客运输，包括海江之间、江海之间的直达运输。"),
]


def records(rows=ARTICLES) -> list[DocumentRecord]:
    config = ChunkingConfig(512, 64)
    out = []
    for doc_id, law, chapter, article, status, text in rows:
        path = [p for p in (law, chapter, article) if p]
        record = chunk_document(doc_id, law, path, text, {"status": status}, config)
        record.domain_pack = "law_zh"
        out.append(record)
    return out


async def edges(store, rel: str) -> set[tuple[str, str]]:
    records_ = await store._query(f"MATCH (a:Document)-[:{rel}]->(b:Document) RETURN a.id AS a, b.id AS b")
    return {(r["a"], r["b"]) for r in records_}


@pytest.mark.asyncio(loop_scope="session")
async def test_cross_reference_resolves_and_dangling_is_dropped(graph_store):
    await graph_store.ingest_documents(records())
    cites = await edges(graph_store, "CITES")
    # 第一百五十三条 cites 本法第一百五十一条、第一百五十二条 (stored) and 第三百四十七条 (not stored).
    assert ("4875", "4873") in cites and ("4875", "4874") in cites
    assert not any(a == "4875" and b not in {"4873", "4874"} for a, b in cites)
    assert await graph_store.dangling_references() >= 1
    rows = await graph_store._query(
        "MATCH (:Document {id: '4875'})-[e:CITES]->(:Document {id: '4873'}) RETURN e.chunk_id AS chunk")
    assert rows[0]["chunk"] == "4875#0"  # provenance chunk


@pytest.mark.asyncio(loop_scope="session")
async def test_dangling_reference_resolves_once_its_article_arrives(graph_store):
    first = [a for a in ARTICLES if a[0] != "4874"]
    await graph_store.ingest_documents(records(first))
    assert ("4875", "4874") not in await edges(graph_store, "CITES")
    before = await graph_store.dangling_references()
    await graph_store.ingest_documents(records([a for a in ARTICLES if a[0] == "4874"]))
    assert ("4875", "4874") in await edges(graph_store, "CITES")
    assert await graph_store.dangling_references() == before - 1


@pytest.mark.asyncio(loop_scope="session")
async def test_amendment_reaches_the_article_it_adds(graph_store):
    await graph_store.ingest_documents(records())
    amends = await edges(graph_store, "AMENDS")
    assert ("5376", "4851") in amends          # 作为第一百三十三条之二
    assert ("5376", "4850") not in amends      # 在第一百三十三条之一后: the anchor is not changed
    rows = await graph_store._query(
        "MATCH (:Document {id: '5376'})-[e:AMENDS]->(:Document {id: '4851'}) RETURN e.kind AS kind")
    assert rows[0]["kind"] == "add"


@pytest.mark.asyncio(loop_scope="session")
async def test_defined_terms_and_versions(graph_store):
    await graph_store.ingest_documents(records())
    rows = await graph_store._query(
        "MATCH (d:Document)-[e:DEFINES]->(t:Term) RETURN d.id AS doc, t.name AS name, t.definition AS definition, e.chunk_id AS chunk")
    defined = {(r["doc"], r["name"]): r for r in rows}
    assert ("4777", "自首") in defined
    assert defined[("4777", "自首")]["definition"].startswith("犯罪以后自动投案")
    assert ("16378", "海上运输") in defined and ("16100", "海上运输") in defined
    versions = await edges(graph_store, "VERSION_OF")
    assert versions == {("16100", "16378")}


@pytest.mark.asyncio(loop_scope="session")
async def test_stale_graph_version_is_relinked(graph_store):
    await graph_store.ingest_documents(records())
    hashes = await graph_store.document_hashes(["4875"])
    assert "4875" in hashes
    await graph_store._query("MATCH (d:Document {id: '4875'}) SET d.graph_version = $v", {"v": DOCGRAPH_VERSION - 1},
                             write=True)
    assert await graph_store.document_hashes(["4875"]) == {}
    result = await graph_store.ingest_documents(records([a for a in ARTICLES if a[0] == "4875"]))
    assert result.stored == 1
    assert ("4875", "4873") in await edges(graph_store, "CITES")


@pytest.mark.asyncio(loop_scope="session")
async def test_document_graph_channels_keep_to_the_search_scope(graph_store):
    """A filtered search gets no chunk outside its collections or metadata
    conditions through graph.article or graph.cites, and a deleted document
    leaves the lookup tables."""
    import dataclasses

    from services.common.filters import parse_filter
    from services.common.retriever import SeedRecord
    from services.retriever_graph.doc_channels import DocChannels

    await graph_store.ingest_documents(records())
    copy = [dataclasses.replace(r, id=f"x{r.id}", collection="other",
                                chunks=[dataclasses.replace(c, id=f"x{c.id}", document_id=f"x{r.id}") for c in r.chunks])
            for r in records([a for a in ARTICLES if a[0] in ("4873", "4875")])]
    await graph_store.ingest_documents(copy)
    docs = DocChannels(graph_store.driver, graph_store.database, refresh_seconds=0.0)
    await docs.load()

    query = "刑法第一百五十三条"
    found = {h.document_id for h in await docs.retrieve(query, [], 10, ["graph.article"])}
    assert found == {"4875"}  # the default collection only
    found = {h.document_id for h in await docs.retrieve(query, [], 10, ["graph.article"], ["other"])}
    assert found == {"x4875"}
    assert await docs.retrieve(query, [], 10, ["graph.article"], ["default"], parse_filter('status = "现行有效"')) == []

    seeds = [SeedRecord("4875", "4875#0", 1.0)]
    cited = {h.document_id for h in await docs.related(query, [], seeds, 10, ["graph.cites"])}
    assert {"4873", "4874"} <= cited and not any(d.startswith("x") for d in cited)
    assert await docs.related(query, [], seeds, 10, ["graph.cites"], ["default"], parse_filter('status = "现行有效"')) == []

    await graph_store.delete_documents(["4875"], None, [])
    await docs._refresh()
    assert await docs.retrieve(query, [], 10, ["graph.article"]) == []


@pytest.mark.asyncio(loop_scope="session")
async def test_a_lookup_channels_hit_carries_its_documents_collection_and_metadata(graph_store):
    """A trial's 水污染防治法第95条 came back through graph.article alone with no metadata and no collection, so
    the repealed article was cited with no 已废止 caveat."""
    from services.retriever_graph.doc_channels import DocChannels

    await graph_store.ingest_documents(records())
    docs = DocChannels(graph_store.driver, graph_store.database, refresh_seconds=0.0)
    await docs.load()
    hits = await docs.retrieve("刑法第一百五十三条", [], 10, ["graph.article"])
    assert [(h.document_id, h.collection, h.metadata.get("status")) for h in hits] == [("4875", "default", AMENDED)]
    cited = await docs.related("刑法第一百五十三条", [], [_seed("4875")], 10, ["graph.cites"])
    assert cited and all(h.collection == "default" and h.metadata.get("status") == AMENDED for h in cited)


def _seed(doc_id: str):
    from services.common.retriever import SeedRecord

    return SeedRecord(doc_id, f"{doc_id}#0", 1.0)


@pytest.mark.asyncio(loop_scope="session")
async def test_writing_a_generic_collection_does_not_rebuild_the_law_lookup_tables(graph_store):
    """The law pack's tables are rebuilt when stored facts change, not when
    documents of a generic collection arrive: that ingest runs no statute
    code in the graph retriever (domains.law_zh.USAGE), yet the reader sees
    the new collection."""
    from domains.law_zh import USAGE
    from services.retriever_graph.doc_channels import DocChannels

    await graph_store.ingest_documents(records())
    docs = DocChannels(graph_store.driver, graph_store.database, refresh_seconds=0.0)
    await docs.load()
    built = USAGE["lookup_index"]
    handbook = chunk_document("hb-graph-1", "员工手册", ["员工手册"], "第三条 员工依照本法第五条的规定申请年假。",
                              {}, ChunkingConfig(512, 64))
    handbook.collection = "handbook-graph"
    await graph_store.ingest_documents([handbook])
    await docs._refresh()
    assert "handbook-graph" in docs.collections and docs.packs["handbook-graph"] == "generic"
    assert USAGE["lookup_index"] == built
    assert await docs.retrieve("员工手册第三条", [], 10, ["graph.article", "graph.term", "graph.offence"],
                               ["handbook-graph"]) == []
    await graph_store.delete_documents(["hb-graph-1"], None, [])
    await graph_store.ingest_documents(records()[:1])  # unchanged facts: nothing relinked
    stale = docs.facts_version
    await graph_store.delete_documents(["4777"], None, [])
    await docs._refresh()
    assert docs.facts_version > stale and USAGE["lookup_index"] > built


@pytest.mark.asyncio(loop_scope="session")
async def test_the_document_graph_stays_inside_each_collection_and_deletes_leave_no_orphans(graph_store):
    """The same statutes in two collections: no CITES, AMENDS, VERSION_OF or
    MENTIONS edge crosses them, each has its own keys and terms, ingesting
    into one leaves the other's term lookups as they were, and deleting
    every document leaves no ArticleKey or Term node behind."""
    import dataclasses

    from services.retriever_graph.doc_channels import DocChannels

    def copy_into(collection: str):
        return [dataclasses.replace(r, id=f"{collection}-{r.id}", collection=collection,
                                    chunks=[dataclasses.replace(c, id=f"{collection}-{c.id}", document_id=f"{collection}-{r.id}")
                                            for c in r.chunks])
                for r in records()]

    await graph_store.ingest_documents(copy_into("left"))
    docs = DocChannels(graph_store.driver, graph_store.database, refresh_seconds=0.0)
    await docs.load()
    before = {h.document_id for h in await docs.retrieve("什么是自首", ["自首"], 10, ["graph.term"], ["left"])}
    assert before == {"left-4777"}
    await graph_store.ingest_documents(copy_into("right"))
    await docs._refresh()
    assert {h.document_id for h in await docs.retrieve("什么是自首", ["自首"], 10, ["graph.term"], ["left"])} == before
    assert {h.document_id for h in await docs.retrieve("什么是自首", ["自首"], 10, ["graph.term"], ["right"])} == {"right-4777"}

    crossing = await graph_store._query(
        "MATCH (a:Document)-[e:CITES|AMENDS|VERSION_OF]-(b:Document) WHERE a.collection <> b.collection RETURN count(e) AS n")
    assert crossing[0]["n"] == 0
    assert await edges(graph_store, "CITES") >= {("left-4875", "left-4873"), ("right-4875", "right-4873")}
    mentions = await graph_store._query(
        "MATCH (d:Document)-[:MENTIONS|DEFINES]->(t:Term) WHERE d.collection <> t.collection RETURN count(*) AS n")
    assert mentions[0]["n"] == 0

    ids = [f"{c}-{r.id}" for c in ("left", "right") for r in records()]
    await graph_store.delete_documents(ids, None, [])
    left = await graph_store._query(
        "MATCH (k:ArticleKey) WHERE k.key STARTS WITH 'left/' OR k.key STARTS WITH 'right/' RETURN count(k) AS n")
    terms = await graph_store._query("MATCH (t:Term) WHERE t.collection IN ['left', 'right'] RETURN count(t) AS n")
    assert left[0]["n"] == 0 and terms[0]["n"] == 0


# 刑法 第二百七十七条 (妨害公务罪) and 第三百一十条 (窝藏、包庇罪): real penal
# articles whose offence names their text does not spell out.
PENAL = [
    ("5017", CRIMINAL, "第六章 妨害社会管理秩序罪", "第二百七十七条", AMENDED,
     "以暴力、威胁方法阻碍国家机关工作人员依法执行职务的，处三年以下有期徒刑、拘役、管制或者罚金。\n"
     "暴力袭击正在依法执行职务的人民警察的，处三年以下有期徒刑、拘役或者管制。"),
    ("5062", CRIMINAL, "第六章 妨害社会管理秩序罪", "第三百一十条", AMENDED,
     "明知是犯罪的人而为其提供隐藏处所、财物，帮助其逃匿或者作假证明包庇的，处三年以下有期徒刑、拘役或者管制；"
     "情节严重的，处三年以上十年以下有期徒刑。\n犯前款罪，事前通谋的，以共同犯罪论处。"),
]
OBSTRUCTION_CASE = "经审理查明，被告人酒后在派出所内推搡、殴打正在执行职务的民警。\n罪名:妨害公务。"


@pytest.mark.asyncio(loop_scope="session")
async def test_offence_names_are_matched_by_meaning_through_a_real_expander(graph_store, tmp_path):
    """With the expander's vectors the offence lookup finds 第二百七十七条 for
    a case named 妨害公务, which no bigram of its text matches; without an
    expander (or with one that is down) the same lookup answers by
    characters and raises nothing."""
    from services.common.embed_client import EmbedClient
    from services.retriever_graph.doc_channels import DocChannels
    from tests.fixtures.expander import serving_expander

    await graph_store.ingest_documents(records(ARTICLES + PENAL))
    by_chars = DocChannels(graph_store.driver, graph_store.database, refresh_seconds=0.0)
    await by_chars.load()
    found = [h.document_id for h in await by_chars.retrieve(OBSTRUCTION_CASE, [], 10, ["graph.offence"])]
    assert "5017" not in found

    down = DocChannels(graph_store.driver, graph_store.database, refresh_seconds=0.0,
                       embed=EmbedClient("127.0.0.1:9", timeout=2.0))
    await down.load()
    assert not down.indexes["law_zh"].vectors_attached
    assert [h.document_id for h in await down.retrieve(OBSTRUCTION_CASE, [], 10, ["graph.offence"])] == found
    await down.embed.close()

    async with serving_expander(tmp_path) as expander_addr:
        dense = DocChannels(graph_store.driver, graph_store.database, refresh_seconds=0.0,
                            embed=EmbedClient(expander_addr))
        await dense.load()
        index = dense.indexes["law_zh"]
        assert index.vectors_attached and index.offence_vectors.shape[0] == len(index.dense_documents)
        hits = await dense.retrieve(OBSTRUCTION_CASE, [], 10, ["graph.offence"])
        harbouring = await dense.retrieve("被告人明知他人犯罪，仍为其提供住处帮助其逃避抓捕。\n罪名:窝藏、包庇。",
                                          [], 10, ["graph.offence"])
        await dense.embed.close()
    assert hits[0].document_id == "5017" and hits[0].channel == "graph.offence"
    assert harbouring[0].document_id == "5062"
