"""KnowledgeGraphStore against a real Neo4j: ingestion, typed relations,
Chinese full-text, attribute coverage, weighted expansion, hostile strings."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio

from services.common.records import EntityRecord
from services.retriever_graph.kg_store import KnowledgeGraphStore

DATA = Path(__file__).resolve().parents[1] / "data"
pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]


def load_rows() -> list[EntityRecord]:
    rows = []
    for line in (DATA / "kg_entities.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        rows.append(EntityRecord(r["name"], r["category"], r["definition"], r["aliases"], r["parents"]))
    return rows


def load_triples() -> list[tuple[str, str, str]]:
    return [(t["subject"], t["predicate"], t["object"]) for t in map(json.loads, (DATA / "kg_triples.jsonl").read_text(encoding="utf-8").splitlines())]


@pytest_asyncio.fixture(loop_scope="session")
async def kg(graph_store):
    store = KnowledgeGraphStore(graph_store.driver, graph_store.database)
    await store.migrate()
    await store.ingest_entities(load_rows())
    stored, failures = await store.ingest_triples(load_triples())
    assert stored == 15 and failures == []
    yield store


async def test_schema_nodes_and_typed_relations(kg):
    records = (await kg.driver.execute_query(
        "MATCH (:Entity {name: '流行性感冒'})-[r]->(v:Value) RETURN type(r) AS t, v.name AS v ORDER BY v", database_=kg.database
    )).records
    assert {r["t"] for r in records} == {"常见症状"}
    assert [r["v"] for r in records] == sorted(["发热", "头痛", "肌肉酸痛", "咳嗽"])
    # object naming a library entity links to the Entity node, not a Value
    linked = (await kg.driver.execute_query(
        "MATCH (:Entity {name: '布洛芬片'})-[r:适应症]->(e:Entity) RETURN e.name AS n", database_=kg.database)).records
    assert [r["n"] for r in linked] == ["流行性感冒"]
    cats = (await kg.driver.execute_query(
        "MATCH (c:Category {name: '蔬菜'})-[:HAS_ENTITY]->(e) RETURN e.name AS n ORDER BY n", database_=kg.database)).records
    assert [r["n"] for r in cats] == ["薯类", "马铃薯"]
    parent = (await kg.driver.execute_query(
        "MATCH (:Entity {name: '薯类'})-[:PARENT_OF]->(c) RETURN c.name AS n", database_=kg.database)).records
    assert [r["n"] for r in parent] == ["马铃薯"]
    same = (await kg.driver.execute_query(
        "MATCH (a:Entity {name: '布洛芬片'})-[:SAME_OBJECT]-(b) RETURN b.name AS n", database_=kg.database)).records
    assert [r["n"] for r in same] == ["布洛芬胶囊"]


async def test_ingestion_is_idempotent_and_reports_unknown_subjects(kg):
    stored, failures = await kg.ingest_triples(load_triples() + [("不存在的实体", "常见症状", "发热"), ("马铃薯", " ", "x")])
    assert stored == 15
    assert [i for i, _ in failures] == [15, 16]
    count = (await kg.driver.execute_query("MATCH ()-[r:常见症状]->() RETURN count(r) AS c", database_=kg.database)).records[0]["c"]
    assert count == 9
    assert await kg.ingest_entities(load_rows()) == (0, len(load_rows()))  # all unchanged
    n = (await kg.driver.execute_query("MATCH (e:Entity {name: '马铃薯'}) RETURN count(e) AS c", database_=kg.database)).records[0]["c"]
    assert n == 1
    changed = load_rows()[0]
    changed.definition += "（修订）"
    assert await kg.ingest_entities([changed]) == (1, 0)
    assert (await kg.lookup([changed.name]))[0].definition.endswith("（修订）")


async def test_lookup_exact_alias_and_controlled_alias(kg):
    hits = await kg.lookup(["土豆"])
    assert [(h.name, h.channel) for h in hits] == [("马铃薯", "graph.alias")]
    hits = await kg.lookup(["18三体综合征"])  # controlled alias: separator dropped
    assert [h.name for h in hits] == ["18—三体综合征"]
    assert [h.name for h in await kg.lookup(["马"])] == ["马"]


async def test_cjk_fulltext_matches_bigrams_not_single_characters(kg):
    names = [h.name for h in await kg.fulltext("马铃", 10)]
    assert "马铃薯" in names and "马" not in names
    names = [h.name for h in await kg.fulltext("感冒药", 10)]
    assert set(names) >= {"流行性感冒", "普通感冒"}
    # a single Chinese character yields no bigram, so nothing longer is found
    assert "马铃薯" not in [h.name for h in await kg.fulltext("马", 10)]


async def test_attribute_coverage_finds_the_disease(kg):
    hits = await kg.attribute_search(["发热", "头痛", "肌肉酸痛"], label="症状")
    assert hits[0].name == "流行性感冒" and hits[0].score == pytest.approx(1.0)
    assert hits[0].relation == "attribute" and hits[0].matched == "发热、头痛、肌肉酸痛"
    # the drug has the same values as adverse reactions: weighted down, below
    by_name = {h.name: h.score for h in hits}
    assert by_name["布洛芬片"] == pytest.approx(0.3)
    assert by_name["普通感冒"] == pytest.approx(1 / 3)
    # without a label every predicate counts fully; ties go to the more specific entity
    hits = await kg.attribute_search(["发热", "头痛", "肌肉酸痛", "发热"])
    assert [h.name for h in hits[:2]] == ["流行性感冒", "布洛芬片"]
    # an open-list marker ("等") is also tried without it
    hits = await kg.attribute_search(["发热等", "肌肉酸痛"], label="症状")
    assert hits[0].name == "流行性感冒" and hits[0].score == pytest.approx(1.0)


async def test_weighted_expansion_uses_reference_weights_and_skips_one_character(kg):
    hits = {h.name: h for h in await kg.expand([("马铃薯", 1.0)])}
    assert hits["薯类"].score == pytest.approx(0.85) and hits["薯类"].relation == "parent"
    assert "马" not in hits
    hits = {h.name: h for h in await kg.expand([("布洛芬片", 1.0)])}
    assert hits["布洛芬胶囊"].score == pytest.approx(0.55) and hits["布洛芬胶囊"].relation == "same_object"
    hits = {h.name: h for h in await kg.expand([("马", 1.0)])}
    assert not any(len(n) > 1 and n.startswith("马铃薯") for n in hits)


@pytest.mark.parametrize("hostile", [
    "'}) MATCH (n) DETACH DELETE n //",
    '" OR 1=1 --',
    "马铃薯`]->() DELETE r //",
    "*:* AND name:/.*/ \\",
    "$(x) {limit: 1}",
])
async def test_hostile_strings_are_parameters(kg, hostile):
    assert await kg.lookup([hostile]) == []
    await kg.fulltext(hostile, 5)
    await kg.attribute_search([hostile, "发热"], label=hostile)
    await kg.expand([(hostile, 1.0)])
    stored, failures = await kg.ingest_triples([("马铃薯", hostile[:60], hostile)])
    assert stored == 1 and not failures
    n = (await kg.driver.execute_query("MATCH (e:Entity) RETURN count(e) AS c", database_=kg.database)).records[0]["c"]
    assert n == 11  # the library, nothing deleted or added
    rel = (await kg.driver.execute_query(
        "MATCH (:Entity {name: '马铃薯'})-[r]->(v:Value {name: $v}) RETURN r.predicate AS p", {"v": hostile}, database_=kg.database)).records
    assert [r["p"] for r in rel] == [hostile[:60].strip()]


async def test_reserved_predicates_and_long_queries(kg):
    stored, failures = await kg.ingest_triples([("马铃薯", "PARENT_OF", "马"), ("马铃薯", "has_alias", "洋芋"), ("马铃薯", "产地", "云南")])
    assert stored == 1 and [i for i, _ in failures] == [0, 1] and "reserved" in failures[0][1]
    hits = {h.name: h for h in await kg.expand([("马铃薯", 1.0)])}
    assert "马" not in hits  # no parent link was made from a fact
    # 2,000 characters are beyond Lucene's 1024 clauses: the query is capped
    # and still searched as text.
    assert [h.name for h in await kg.fulltext("马铃" + "薯" * 1998, 5)][:1] == ["马铃薯"]


async def test_a_retry_after_a_write_died_before_linking_groups_links_them(graph_store, monkeypatch):
    # Crash trials (bench/crash_workloads.py, Neo4j killed mid-ingest): the
    # entities were stored, their SAME_OBJECT edges not yet; the retry found
    # every entity unchanged and linked nothing, so the edges never came.
    store = KnowledgeGraphStore(graph_store.driver, graph_store.database)
    await store.migrate()
    rows = load_rows()
    linking = KnowledgeGraphStore._link_groups

    async def dies(self, *args, **kwargs):
        raise ConnectionError("Neo4j went away")

    monkeypatch.setattr(KnowledgeGraphStore, "_link_groups", dies)
    with pytest.raises(ConnectionError):
        await store.ingest_entities(rows, collection="retried")
    monkeypatch.setattr(KnowledgeGraphStore, "_link_groups", linking)

    async def same_object() -> list[str]:
        records = (await store.driver.execute_query(
            "MATCH (:Entity {collection: 'retried', name: '布洛芬片'})-[:SAME_OBJECT]-(b) RETURN b.name AS n",
            database_=store.database)).records
        return [r["n"] for r in records]

    assert await same_object() == []
    written, unchanged = await store.ingest_entities(rows, collection="retried")
    assert written == 0 and unchanged == len(rows)  # nothing to rewrite ...
    assert await same_object() == ["布洛芬胶囊"]  # ... and the groups are linked


async def test_a_retry_after_a_write_cancelled_before_the_parents_merges_them(graph_store, monkeypatch):
    # Crash trials (bench/crash_workloads.py, the gateway killed mid-ingest:
    # retriever_graph's call cancelled): the entities and their content
    # hashes were stored, their parents not; the retry found every entity
    # unchanged, and 47 parent entities with their PARENT_OF edges never came.
    from services.retriever_graph import kg_store

    store = KnowledgeGraphStore(graph_store.driver, graph_store.database)
    await store.migrate()
    rows = load_rows()
    writing = KnowledgeGraphStore._write

    async def cancelled_at_parents(self, query, **params):
        if query == kg_store._MERGE_PARENTS:
            raise ConnectionError("the call was cancelled")
        return await writing(self, query, **params)

    monkeypatch.setattr(KnowledgeGraphStore, "_write", cancelled_at_parents)
    with pytest.raises(ConnectionError):
        await store.ingest_entities(rows, collection="cancelled")
    monkeypatch.setattr(KnowledgeGraphStore, "_write", writing)

    async def children_of_the_parent() -> list[str]:
        records = (await store.driver.execute_query(
            "MATCH (:Entity {collection: 'cancelled', name: '薯类'})-[:PARENT_OF]->(c) RETURN c.name AS n",
            database_=store.database)).records
        return [r["n"] for r in records]

    assert await children_of_the_parent() == []
    assert (await store.ingest_entities(rows, collection="cancelled"))[0] == 0  # every entity unchanged ...
    assert await children_of_the_parent() == ["马铃薯"]  # ... and the parent link is there
