"""Collections, metadata filters, deletion and the collection upgrade of
the graph retriever against a real Neo4j: channels search only their scope
and still fill top_k; deleting a document removes its nodes, its edges and
the headings only it kept (checked in the graph); library entities belong
to collections; a graph stored before collections keeps working."""
from __future__ import annotations

import json

import pytest

from services.common.filters import parse_filter
from services.ingest.chunking import ChunkingConfig, chunk_document, chunk_sections
from services.ingest.files.model import Block, Section
from services.common.records import EntityRecord
from services.retriever_graph.kg_store import KnowledgeGraphStore
from services.retriever_graph.store import GraphStore
from tests.retriever_graph.test_store import q, scalar

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]
CONFIG = ChunkingConfig()


def law(doc_id: str, law_name: str, chapter: str, article: str, text: str, *, collection: str = "default",
        status: str = "现行有效"):
    return chunk_document(doc_id, law_name, [law_name, chapter, article], text, {"status": status, "law": law_name}, CONFIG,
                          collection)


async def test_collections_keep_overlapping_text_apart(graph_store: GraphStore):
    text = "员工出差住宿费按照城市类别分级报销，超出标准的部分由个人承担。"
    docs = [law("a1", "差旅办法", "第一章", "第一条", text, collection="alpha"),
            law("b1", "差旅办法", "第一章", "第一条", text, collection="beta")]
    assert (await graph_store.ingest_documents(docs)).stored == 2
    # the same heading path makes one Heading per collection
    assert await scalar(graph_store, "MATCH (h:Heading {name: '差旅办法'}) RETURN count(h)") == 2
    for collections, expected in ((["alpha"], {"a1"}), (["beta"], {"b1"}), (["alpha", "beta"], {"a1", "b1"})):
        hits = await graph_store.retrieve("差旅办法住宿费报销", ["差旅办法", "住宿费", "报销"], 10, collections=collections)
        assert {h.document_id for h in hits} == expected
        assert {h.channel for h in hits} >= {"graph.heading"} or collections == ["alpha", "beta"]
        assert {h.collection for h in hits} == set(collections)


async def test_a_collection_is_deleted_a_batch_of_documents_a_transaction_and_forgets_its_pack(graph_store: GraphStore,
                                                                                              monkeypatch):
    # a trial's delete of the law collection ran Neo4j out of heap in one transaction and deleted nothing
    from services.retriever_graph.backend import GraphBackend
    from tests.deletion_batches import record_batches_of_two

    docs = [law(f"g{i}", "分批办法", "第一章", f"第{i}条", f"分批删除的条文{i}。", collection="gone") for i in range(5)]
    assert (await graph_store.ingest_documents(docs)).stored == 5
    assert "gone" in await graph_store.collection_packs()
    calls = record_batches_of_two(monkeypatch, graph_store)
    deleted = await GraphBackend(graph_store).delete_documents([], ["gone"], [])
    assert deleted.documents == 5 and calls == [["g0", "g1"], ["g2", "g3"], ["g4"], []]
    assert await scalar(graph_store, "MATCH (d:Document {collection: 'gone'}) RETURN count(d)") == 0
    assert "gone" not in await graph_store.collection_packs()  # the last, scoped call lets it forget the pack


async def test_a_filter_returns_only_matching_documents_and_still_fills_top_k(graph_store: GraphStore):
    old = [law(f"old{i}", "大气污染防治法", "第七章 法律责任", f"第{i}条",
               f"违反本法规定，超标排放大气污染物的，责令改正，处以罚款。超标排放的，依法处罚。旧{i}", status="已废止")
           for i in range(40)]
    new = [law(f"new{i}", "大气污染防治法（修订）", "第七章 法律责任", f"第{i}条", f"超标排放的，处以罚款。新{i}")
           for i in range(12)]
    assert (await graph_store.ingest_documents(old + new)).stored == 52
    keywords = ["超标排放", "罚款"]
    unfiltered = await graph_store.retrieve("超标排放罚款", keywords, 5, channels=["graph.fulltext"])
    assert all(h.document_id.startswith("old") for h in unfiltered)  # the repealed ones score higher
    hits = await graph_store.retrieve("超标排放罚款", keywords, 5, channels=["graph.fulltext"],
                                      conditions=parse_filter('status = "现行有效"'))
    assert len(hits) == 10  # 2 x top_k, all in force
    assert all(h.document_id.startswith("new") and h.metadata["status"] == "现行有效" for h in hits)
    some = await graph_store.retrieve("超标排放罚款", keywords, 50, channels=["graph.fulltext"],
                                      conditions=parse_filter('law IN ("大气污染防治法") AND status = "已废止"'))
    assert len(some) == 40
    listed = await graph_store.list_documents([], ["default"], parse_filter('status = "现行有效"'), 100)
    assert sorted(d.id for d in listed) == sorted(d.id for d in new)


async def test_delete_removes_the_document_its_chunks_edges_and_orphan_headings(graph_store: GraphStore):
    body = [Block("".join(f"第{i}句关于保密义务的说明。" for i in range(60)))]
    gone = chunk_sections("gone", "保密制度", ["保密制度"], [Section(["第一章 总则"], body)], {"k": "v"},
                          ChunkingConfig(40, 8), collection="del")
    kept = law("kept", "劳动法", "第一章 总则", "第一条", "劳动者应当履行保密义务。", collection="del")
    sibling = law("sib", "劳动法", "第一章 总则", "第二条", "用人单位应当保护劳动者的合法权益。", collection="del")
    assert (await graph_store.ingest_documents([gone, kept, sibling])).stored == 3
    assert len(gone.chunks) >= 3
    nodes_before = await scalar(graph_store, "MATCH (n) RETURN count(n)")
    edges_before = await scalar(graph_store, "MATCH ()-[r]->() RETURN count(r)")
    deleted = await graph_store.delete_documents(["gone", "sib"], ["del"], [])
    assert deleted.document_ids == ["gone", "sib"] and deleted.chunks == len(gone.chunks) + 1
    nodes_after = await scalar(graph_store, "MATCH (n) RETURN count(n)")
    edges_after = await scalar(graph_store, "MATCH ()-[r]->() RETURN count(r)")
    assert nodes_before - nodes_after == deleted.graph_nodes == 2 + len(gone.chunks) + 1 + 1  # + the heading 保密制度
    assert edges_before - edges_after == deleted.graph_edges
    assert await scalar(graph_store, "MATCH (d:Document) WHERE d.id IN ['gone', 'sib'] RETURN count(d)") == 0
    assert await scalar(graph_store, "MATCH (c:Chunk) WHERE c.document_id IN ['gone', 'sib'] RETURN count(c)") == 0
    assert await scalar(graph_store, "MATCH (h:Heading {name: '保密制度'}) RETURN count(h)") == 0  # only it was under it
    # the heading still holding 第一条 stays, with its parent
    kept_path = await q(graph_store, "MATCH p = (:Heading)-[:PARENT_OF*]->(:Document {id: 'kept'}) RETURN length(p) AS n")
    assert max(r["n"] for r in kept_path) == 2
    hits = await graph_store.retrieve("保密义务", ["保密义务"], 10, collections=["del"])
    assert {h.document_id for h in hits} == {"kept"}
    assert (await graph_store.delete_documents(["gone"], None, [])).documents == 0  # idempotent


async def test_reingest_moves_nothing_across_collections_and_prunes_left_headings(graph_store: GraphStore):
    first = law("r1", "旧法", "第一章", "第一条", "旧内容。", collection="re")
    await graph_store.ingest_documents([first])
    moved = law("r1", "新法", "第二章", "第一条", "新内容。", collection="re")
    assert (await graph_store.ingest_documents([moved])).stored == 1
    assert await scalar(graph_store, "MATCH (h:Heading) WHERE h.name IN ['旧法', '第一章'] AND h.collection = 're' RETURN count(h)") == 0
    assert [r["t"] for r in await q(graph_store, "MATCH (:Document {id: 'r1'})-[:HAS_CHUNK]->(c) RETURN c.text AS t")] == ["新内容。"]
    conflict = await graph_store.ingest_documents([law("r1", "新法", "第二章", "第一条", "又一版。", collection="other")])
    assert conflict.stored == 0 and "stored in collection 're'" in conflict.failures[0].reason


async def test_upgrade_of_a_graph_stored_before_collections(graph_store: GraphStore):
    await q(graph_store, "MATCH (n) DETACH DELETE n")
    await q(graph_store, "CREATE (h:Heading {id: '专利法', name: '专利法', level: 1, keys: ['专利法'], next_position: 1})"
                         "-[:PARENT_OF]->(d:Document {id: '7', title: '专利法', content_hash: 'h', heading_path: ['专利法', '第七条'],"
                         " metadata: $meta, position: 0})-[:HAS_CHUNK]->(:Chunk {id: '7#0', document_id: '7', ordinal: 0,"
                         " text: '对发明人的专利申请，任何单位不得压制。', heading_path: ['专利法', '第七条'],"
                         " search_text: '专利法 第七条\\n对发明人的专利申请，任何单位不得压制。'})",
            meta=json.dumps({"status": "现行有效"}, ensure_ascii=False))
    await graph_store.migrate()
    hits = await graph_store.retrieve("专利申请", ["专利申请"], 5, conditions=parse_filter('status = "现行有效"'))
    assert [(h.document_id, h.collection) for h in hits][:1] == [("7", "default")]
    assert await graph_store.collection_counts() == {"default": (1, 1)}


async def test_library_entities_belong_to_collections(graph_store: GraphStore):
    kg = KnowledgeGraphStore(graph_store.driver, graph_store.database)
    await kg.migrate()
    await kg.ingest_entities([EntityRecord("流行性感冒", "疾病", aliases=["流感"])], collection="med")
    await kg.ingest_entities([EntityRecord("流行性感冒", "传染病")], collection="other")
    stored, failures = await kg.ingest_triples([("流行性感冒", "常见症状", "发热")], collection="med")
    assert (stored, failures) == (1, [])
    assert [(h.name, h.category) for h in await kg.lookup(["流感"], ["med"])] == [("流行性感冒", "疾病")]
    assert [h.category for h in await kg.lookup(["流行性感冒"], ["other"])] == ["传染病"]
    assert await kg.attribute_search(["发热", "头痛"], collections=["other"]) == []
    assert [h.name for h in await kg.attribute_search(["发热", "咳嗽"], collections=["med"])] == ["流行性感冒"]
    assert await kg.entity_counts() == {"med": 1, "other": 1}
    nodes, edges, entities = await kg.delete_collection("med")
    assert entities == 1 and nodes >= 4 and edges >= 3  # entity, alias(es), category, value; their edges
    assert await kg.lookup(["流感"], ["med"]) == []
    assert await scalar(graph_store, "MATCH (n) WHERE n.collection = 'med' RETURN count(n)") == 0
    assert await kg.entity_counts() == {"other": 1}
