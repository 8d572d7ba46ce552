"""Knowledge-graph editing through the real mesh (gateway, expander, both
retrievers over the test PostgreSQL and Neo4j): get, update, delete and
merge entities, add and delete relations, export and re-ingest; each
store is then read directly to see that no edge dangles."""
from __future__ import annotations

import json
import urllib.parse

import asyncpg
import grpc
import httpx
import pytest
import pytest_asyncio
from google.protobuf import field_mask_pb2
from neo4j import AsyncGraphDatabase

from graphmesh.common.v1 import entity_pb2
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.errors import field_violations
from tests.fixtures.mesh import extra_gateway

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]

C = "kgedit"
ENTITIES = [
    {"name": "流行性感冒", "category": "呼吸科疾病", "definition": "流感病毒引起的急性呼吸道传染病。", "aliases": ["流感"]},
    {"name": "流感病毒感染", "category": "呼吸科疾病", "definition": "", "aliases": ["病毒性流感"], "parents": ["呼吸道感染"],
     "attributes": {"icd": "J11"}},
    {"name": "呼吸道感染", "category": "呼吸科疾病", "definition": "呼吸道的感染。"},
    {"name": "奥司他韦", "category": "抗病毒药", "definition": "神经氨酸酶抑制剂。", "parents": ["流感病毒感染"]},
    {"name": "布洛芬片", "category": "解热镇痛药", "definition": "非甾体抗炎药。"},
]
TRIPLES = [
    ("流感病毒感染", "常见症状", "发热"), ("流行性感冒", "常见症状", "发热"), ("奥司他韦", "适应症", "流感病毒感染"),
    ("流感病毒感染", "并发", "流行性感冒"), ("布洛芬片", "适应症", "流行性感冒"), ("流感病毒感染", "常见症状", "寒战"),
]


def name(entity: str, collection: str = C) -> str:
    return f"collections/{collection}/entities/{entity}"


def jsonl(rows) -> bytes:
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stub(mesh):
    channel = grpc.aio.insecure_channel(mesh.gateway)
    stub = gateway_pb2_grpc.GatewayServiceStub(channel)
    await stub.Ingest(gateway_pb2.IngestRequest(collection=C, kind=gateway_pb2.INGEST_KIND_ENTITIES, jsonl=jsonl(ENTITIES)), timeout=120)
    await stub.Ingest(gateway_pb2.IngestRequest(collection=C, kind=gateway_pb2.INGEST_KIND_TRIPLES, jsonl=jsonl(
        {"subject": s, "predicate": p, "object": o} for s, p, o in TRIPLES)), timeout=120)
    yield stub
    await channel.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def graph(mesh):
    driver = AsyncGraphDatabase.driver(mesh.neo4j_uri, auth=None)
    yield lambda q, **p: driver.execute_query(q, p | {"c": C}, routing_="r")
    await driver.close()


async def cards(mesh) -> dict[str, list[str]]:
    """{card name: parents} of the collection in PostgreSQL."""
    conn = await asyncpg.connect(mesh.pg_dsn)
    try:
        return {r["name"]: list(r["parents"]) for r in await conn.fetch(
            "SELECT name, parents FROM entity_cards WHERE collection = $1", C)}
    finally:
        await conn.close()


async def pg_orphans(mesh) -> int:
    conn = await asyncpg.connect(mesh.pg_dsn)
    try:
        return await conn.fetchval(
            "SELECT (SELECT count(*) FROM entity_surfaces s WHERE NOT EXISTS (SELECT 1 FROM entity_cards c WHERE "
            "c.collection = s.collection AND c.name = s.entity_name)) + (SELECT count(*) FROM entity_grams g WHERE NOT EXISTS "
            "(SELECT 1 FROM entity_cards c WHERE c.collection = g.collection AND c.name = g.entity_name))")
    finally:
        await conn.close()


async def top(stub, query: str) -> gateway_pb2.SearchEntitiesResponse:
    return await stub.SearchEntities(gateway_pb2.SearchEntitiesRequest(query=query, top_k=5, collections=[C]), timeout=60)


async def code_and_fields(call) -> tuple[grpc.StatusCode, list[str]]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value.code(), [f for f, _ in field_violations(err.value)]


async def test_get_returns_the_entity_with_its_facts_both_ways(stub):
    got = (await stub.GetEntity(gateway_pb2.GetEntityRequest(name=name("流感病毒感染")), timeout=30)).entity
    assert got.name == name("流感病毒感染") and got.entity.parents == ["呼吸道感染"] and got.entity.attributes["icd"] == "J11"
    facts = {(t.subject, t.predicate, t.object) for t in got.relations}
    assert ("奥司他韦", "适应症", "流感病毒感染") in facts and ("流感病毒感染", "常见症状", "寒战") in facts


async def test_merge_moves_aliases_and_edges_to_the_survivor_in_both_stores(mesh, stub, graph):
    reply = await stub.MergeEntities(gateway_pb2.MergeEntitiesRequest(name=name("流行性感冒"), entities=[name("流感病毒感染")]), timeout=120)
    survivor = reply.entity.entity
    assert list(survivor.aliases) == ["流感", "流感病毒感染", "病毒性流感"] and list(survivor.parents) == ["呼吸道感染"]
    assert survivor.attributes["icd"] == "J11"
    # 常见症状 发热 was on both (kept once), 并发 became a self-loop (dropped): 2 moved
    assert reply.relations_moved == 2
    facts = {(t.subject, t.predicate, t.object) for t in reply.entity.relations}
    assert facts == {("流行性感冒", "常见症状", "发热"), ("流行性感冒", "常见症状", "寒战"), ("奥司他韦", "适应症", "流行性感冒"),
                     ("布洛芬片", "适应症", "流行性感冒")}
    # Neo4j: the merged node and every edge it had are gone; nothing points at its name
    records = (await graph("MATCH (n {collection: $c}) WHERE n.name = '流感病毒感染' AND NOT n:Alias "
                           "RETURN count(n) AS n")).records
    assert records[0]["n"] == 0
    loops = (await graph("MATCH (e:Entity {collection: $c})-[r]->(e) RETURN count(r) AS n")).records[0]["n"]
    assert loops == 0
    fever = (await graph("MATCH (:Entity {collection: $c, name: '流行性感冒'})-[r:`常见症状`]->(:Value {name: '发热'}) "
                         "RETURN count(r) AS n")).records[0]["n"]
    assert fever == 1
    parents = (await graph("MATCH (p:Entity {collection: $c})-[:PARENT_OF]->(c:Entity {name: '奥司他韦'}) RETURN p.name AS p")).records
    assert [r["p"] for r in parents] == ["流行性感冒"]
    orphans = (await graph("MATCH (a:Alias {collection: $c}) WHERE NOT ()-[:HAS_ALIAS]->(a) RETURN count(a) AS n")).records[0]["n"]
    assert orphans == 0
    # PostgreSQL: no card of it, no card names it as parent, no surface or gram of it left
    stored = await cards(mesh)
    assert "流感病毒感染" not in stored and stored["奥司他韦"] == ["流行性感冒"]
    assert not any("流感病毒感染" in p for p in stored.values()) and await pg_orphans(mesh) == 0


async def test_merged_alias_and_old_name_find_the_survivor(stub):
    for query in ("病毒性流感", "流感病毒感染"):
        reply = await top(stub, query)
        assert reply.entities[0].name == "流行性感冒", (query, [e.name for e in reply.entities])
        assert "流感病毒感染" not in [e.name for e in reply.entities]
    assert (await top(stub, "病毒性流感")).normalized_query == "流行性感冒"  # the expander's index followed


async def test_update_changes_what_search_returns(stub):
    before = await top(stub, "芬必得")
    assert not before.entities or before.entities[0].name != "布洛芬片"
    patch = entity_pb2.Entity(aliases=["芬必得"], definition="解热镇痛。")
    reply = await stub.UpdateEntity(gateway_pb2.UpdateEntityRequest(
        name=name("布洛芬片"), entity=patch, update_mask=field_mask_pb2.FieldMask(paths=["aliases"])), timeout=60)
    assert list(reply.entity.entity.aliases) == ["芬必得"] and reply.entity.entity.definition == "非甾体抗炎药。"  # not in the mask
    after = await top(stub, "芬必得")
    assert after.entities[0].name == "布洛芬片"


async def test_delete_removes_every_edge_in_both_stores(mesh, stub, graph):
    reply = await stub.DeleteEntity(gateway_pb2.DeleteEntityRequest(name=name("呼吸道感染")), timeout=60)
    assert reply.by_store["retriever_graph"].entities == 1 and reply.by_store["retriever_pg"].entities == 1
    left = (await graph("MATCH (n:Entity {collection: $c, name: '呼吸道感染'}) RETURN count(n) AS n")).records[0]["n"]
    assert left == 0
    got = (await stub.GetEntity(gateway_pb2.GetEntityRequest(name=name("流行性感冒")), timeout=30)).entity
    assert list(got.entity.parents) == []
    stored = await cards(mesh)
    assert "呼吸道感染" not in stored and stored["流行性感冒"] == [] and await pg_orphans(mesh) == 0
    code, _ = await code_and_fields(stub.GetEntity(gateway_pb2.GetEntityRequest(name=name("呼吸道感染")), timeout=30))
    assert code == grpc.StatusCode.NOT_FOUND


async def test_relations_add_and_delete(stub, graph):
    fact = entity_pb2.Triple(subject="布洛芬片", predicate="禁忌", object="胃溃疡")
    await stub.CreateRelation(gateway_pb2.CreateRelationRequest(parent=f"collections/{C}", relation=fact), timeout=30)
    got = (await stub.GetEntity(gateway_pb2.GetEntityRequest(name=name("布洛芬片")), timeout=30)).entity
    assert ("布洛芬片", "禁忌", "胃溃疡") in {(t.subject, t.predicate, t.object) for t in got.relations}
    reply = await stub.DeleteRelation(gateway_pb2.DeleteRelationRequest(parent=f"collections/{C}", relation=fact), timeout=30)
    assert reply.deleted == 1
    values = (await graph("MATCH (v:Value {collection: $c, name: '胃溃疡'}) RETURN count(v) AS n")).records[0]["n"]
    assert values == 0  # no fact uses the value any more
    code, _ = await code_and_fields(stub.DeleteRelation(gateway_pb2.DeleteRelationRequest(parent=f"collections/{C}", relation=fact), timeout=30))
    assert code == grpc.StatusCode.NOT_FOUND
    unknown = entity_pb2.Triple(subject="无此药", predicate="禁忌", object="胃溃疡")
    code, _ = await code_and_fields(stub.CreateRelation(gateway_pb2.CreateRelationRequest(parent=f"collections/{C}", relation=unknown), timeout=30))
    assert code == grpc.StatusCode.NOT_FOUND


async def test_bad_input_names_the_field(stub):
    cases = [
        (stub.MergeEntities(gateway_pb2.MergeEntitiesRequest(name=name("流行性感冒"), entities=[name("流行性感冒")]), timeout=30),
         "entities[0]"),
        (stub.MergeEntities(gateway_pb2.MergeEntitiesRequest(name=name("流行性感冒"), entities=[name("布洛芬片", "other")]), timeout=30),
         "entities[0]"),
        (stub.GetEntity(gateway_pb2.GetEntityRequest(name="collections/kgedit/documents/x"), timeout=30), "name"),
        (stub.UpdateEntity(gateway_pb2.UpdateEntityRequest(name=name("布洛芬片"), update_mask=field_mask_pb2.FieldMask(
            paths=["relations"])), timeout=30), "update_mask.paths[0]"),
        (stub.CreateRelation(gateway_pb2.CreateRelationRequest(parent=f"collections/{C}", relation=entity_pb2.Triple(
            subject="布洛芬片", predicate=" ", object="x")), timeout=30), "relation.predicate"),
        (stub.ExportEntities(gateway_pb2.ExportEntitiesRequest(parent=f"collections/{C}", page_token="nope"), timeout=30), "page_token"),
    ]
    for call, field in cases:
        assert await code_and_fields(call) == (grpc.StatusCode.INVALID_ARGUMENT, [field])
    code, _ = await code_and_fields(stub.MergeEntities(gateway_pb2.MergeEntitiesRequest(
        name=name("流行性感冒"), entities=[name("无此病")]), timeout=30))
    assert code == grpc.StatusCode.NOT_FOUND
    # a trial's export of a collection that does not exist answered 200 and nothing, where a listing says 404
    code, _ = await code_and_fields(stub.ExportEntities(gateway_pb2.ExportEntitiesRequest(parent="collections/kgedit_nowhere"),
                                                        timeout=30))
    assert code == grpc.StatusCode.NOT_FOUND


async def export_all(stub, collection: str, page_size: int) -> tuple[list[str], list[str]]:
    entities, triples, token = [], [], ""
    while True:
        page = await stub.ExportEntities(gateway_pb2.ExportEntitiesRequest(
            parent=f"collections/{collection}", page_size=page_size, page_token=token), timeout=60)
        entities += page.entities_jsonl.splitlines()
        triples += page.triples_jsonl.splitlines()
        token = page.next_page_token
        if not token:
            return entities, triples


async def test_export_reingests_into_a_new_collection_as_it_was(stub):
    entities, triples = await export_all(stub, C, page_size=2)
    assert len(entities) == 3 and len(triples) == 4  # 流感病毒感染 merged, 呼吸道感染 deleted
    for kind, lines in ((gateway_pb2.INGEST_KIND_ENTITIES, entities), (gateway_pb2.INGEST_KIND_TRIPLES, triples)):
        reply = await stub.Ingest(gateway_pb2.IngestRequest(collection="kgedit_copy", kind=kind, jsonl="\n".join(lines).encode()), timeout=120)
        assert not reply.failures and reply.stored == len(lines)
    assert await export_all(stub, "kgedit_copy", page_size=1000) == (entities, triples)


async def test_rest_routes_and_auth_on_writes(mesh, stub):
    path = "/v1/" + urllib.parse.quote(name("布洛芬片"))
    async with httpx.AsyncClient(base_url=mesh.rest_url, timeout=60) as http:
        got = await http.get(path)
        assert got.status_code == 200 and got.json()["entity"]["entity"]["name"] == "布洛芬片"
        patched = await http.patch(path, json={"entity": {"definition": "经 REST 改。"}, "updateMask": "definition"})
        assert patched.status_code == 200 and patched.json()["entity"]["entity"]["definition"] == "经 REST 改。"
        itself = await http.post(path + ":merge", json={"entities": [name("布洛芬片")]})
        assert itself.status_code == 400 and "entities[0]" in itself.text
    from services.gateway.api.auth import new_key
    from services.gateway.config import GatewaySettings

    key, record = new_key("editor")
    settings = GatewaySettings(port=0, rest={"port": -1}, auth={"enabled": True, "api_keys": record.line()})
    async with extra_gateway(mesh, settings) as guarded:
        request = gateway_pb2.DeleteEntityRequest(name=name("布洛芬片"))
        code, _ = await code_and_fields(guarded.DeleteEntity(request, timeout=30))
        assert code == grpc.StatusCode.UNAUTHENTICATED
        got = await guarded.GetEntity(gateway_pb2.GetEntityRequest(name=name("布洛芬片")), timeout=30,
                                      metadata=(("authorization", f"Bearer {key}"),))
        assert got.entity.entity.name == "布洛芬片"


async def test_cli_export_and_merge_refusal(mesh, stub, tmp_path, monkeypatch, capsys):
    import asyncio

    from services.cli.main import main

    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", mesh.gateway)
    monkeypatch.delenv("GRAPHMESH_API_KEY", raising=False)
    assert await asyncio.to_thread(main, ["entity", "export", "--collection", C, "--out", str(tmp_path)]) == 0
    entities, triples = await export_all(stub, C, page_size=1000)
    assert (tmp_path / "entities.jsonl").read_text(encoding="utf-8").splitlines() == entities
    assert (tmp_path / "triples.jsonl").read_text(encoding="utf-8").splitlines() == triples
    assert await asyncio.to_thread(main, ["entity", "merge", "布洛芬片", "布洛芬片", "--collection", C]) == 2
    assert "INVALID_ARGUMENT: entities[0]" in capsys.readouterr().err
