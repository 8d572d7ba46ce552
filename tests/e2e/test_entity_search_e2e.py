"""Entity search end to end: knowledge ingestion through the gateway's
Ingest RPC, then SearchEntities over gRPC and REST against real Neo4j,
PostgreSQL and gRPC servers (expander with a Cilin-format synonym file)."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from graphmesh.common.v1 import entity_pb2, types_pb2
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.errors import field_violations

DATA = Path(__file__).resolve().parents[1] / "data"
pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stub(mesh):
    channel = grpc.aio.insecure_channel(mesh.gateway)
    yield gateway_pb2_grpc.GatewayServiceStub(channel)
    await channel.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def library(stub):
    entities = await stub.Ingest(gateway_pb2.IngestRequest(
        jsonl=(DATA / "kg_entities.jsonl").read_bytes(), kind=gateway_pb2.INGEST_KIND_ENTITIES), timeout=300)
    triples = await stub.Ingest(gateway_pb2.IngestRequest(
        jsonl=(DATA / "kg_triples.jsonl").read_bytes() + b'\n{"subject": "nobody", "predicate": "p", "object": "o"}\n{"subject": 1}',
        kind=gateway_pb2.INGEST_KIND_TRIPLES), timeout=300)
    return entities, triples


async def search(stub, query: str, top_k: int = 10) -> gateway_pb2.SearchEntitiesResponse:
    return await stub.SearchEntities(gateway_pb2.SearchEntitiesRequest(query=query, top_k=top_k), timeout=60)


async def test_ingestion_counts_and_failures(stub, library):
    entities, triples = library
    assert entities.received == 11 and entities.stored == 11 and not entities.failures
    again = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=(DATA / "kg_entities.jsonl").read_bytes(), kind=gateway_pb2.INGEST_KIND_ENTITIES), timeout=120)
    assert (again.stored, again.unchanged) == (0, 11)  # both stores left every entity alone
    assert triples.received == 17 and triples.stored == 15
    assert sorted(f.index for f in triples.failures) == [16, 17]  # line numbers (line 15 is blank)
    assert any("not a library entity" in f.reason for f in triples.failures)


async def test_alias_query_returns_the_library_entity_with_evidence(stub, library):
    reply = await search(stub, "土豆")
    top = reply.entities[0]
    assert top.name == "马铃薯" and top.category == "蔬菜" and top.definition.startswith("茄科")
    assert reply.rewritten and reply.normalized_query == "马铃薯"
    assert any(e.channel == "graph.alias" and e.matched == "土豆" for e in top.evidence)
    assert top.relation == entity_pb2.ENTITY_RELATION_DIRECT and "fuzzy" in top.score_breakdown


async def test_yangyu_reaches_potato_through_the_synonym_dictionary(stub, library):
    reply = await search(stub, "洋芋")
    assert reply.rewritten and reply.gate_reason == "exact_alias"
    assert reply.entities[0].name == "马铃薯"


async def test_expansion_brings_parent_with_its_relation(stub, library):
    reply = await search(stub, "马铃薯")
    names = [e.name for e in reply.entities]
    assert names[0] == "马铃薯" and reply.route == "local"
    parent = next(e for e in reply.entities if e.name == "薯类")
    assert parent.relation == entity_pb2.ENTITY_RELATION_PARENT
    assert any(e.channel == "graph.expand" and e.matched == "parent:马铃薯" for e in parent.evidence)
    assert "马" not in names  # a longer query never pulls in the one-character entity


async def test_one_character_query_returns_only_its_entity(stub, library):
    reply = await search(stub, "马")
    assert [e.name for e in reply.entities] == ["马"]


async def test_symptom_list_finds_the_disease_through_the_graph(stub, library):
    reply = await search(stub, "症状：发热、头痛、肌肉酸痛")
    assert reply.route == "attribute"
    top = reply.entities[0]
    assert top.name == "流行性感冒" and top.relation == entity_pb2.ENTITY_RELATION_ATTRIBUTE
    ev = next(e for e in top.evidence if e.channel == "graph.attribute")
    assert ev.score == pytest.approx(1.0) and ev.matched == "发热、头痛、肌肉酸痛"
    # the attribute route asks only the graph: no entity named like a symptom comes from PostgreSQL
    assert not any(t.stage == "retrieve_entities.pg" for t in reply.timings)
    assert not any(e.channel.startswith("pg.") for c in reply.entities for e in c.evidence)


async def test_category_overview_is_routed_global(stub, library):
    reply = await search(stub, "蔬菜有哪些")
    assert reply.route == "global" and reply.route_confidence >= 0.6
    assert {"马铃薯", "薯类"} <= {e.name for e in reply.entities}


async def test_global_route_answers_with_a_category_summary(stub, library):
    reply = await search(stub, "呼吸科疾病有哪些")
    assert reply.route == "global"
    [summary] = [c for c in reply.category_summaries if c.category == "呼吸科疾病"]
    assert summary.members == 2
    assert list(summary.top_members) == ["流行性感冒", "普通感冒"]  # most facts first
    assert {(f.predicate, f.value, f.members) for f in summary.shared_facts} == {("常见症状", "发热", 2), ("常见症状", "咳嗽", 2)}
    assert not (await search(stub, "马铃薯")).category_summaries  # local route: no overview


async def test_low_confidence_fuzzy_query_is_not_rewritten(stub, library):
    reply = await search(stub, "马铃薯总产值")
    assert not reply.rewritten and reply.normalized_query == "马铃薯总产值"
    names = [e.name for e in reply.entities]
    assert names and set(names) <= {"马铃薯", "马铃薯产量", "马铃薯种植面积", "薯类"}


@pytest.mark.parametrize("query", ["'}) MATCH (n) DETACH DELETE n //", "马铃薯`]->() DELETE r //", '" OR 1=1 --'])
async def test_hostile_queries_change_nothing(stub, library, query):
    await search(stub, query)
    reply = await search(stub, "马铃薯")
    assert reply.entities[0].name == "马铃薯"


async def test_bad_input_is_invalid_argument_naming_the_field(stub, library):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await search(stub, "   ")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(err.value)[0][0] == "query"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await search(stub, "马铃薯", top_k=1000)
    assert field_violations(err.value)[0][0] == "top_k"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Ingest(gateway_pb2.IngestRequest(jsonl=b'{"category": "x"}', kind=gateway_pb2.INGEST_KIND_ENTITIES), timeout=30)
    assert field_violations(err.value)[0][0] == "jsonl[0].name"


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body, ensure_ascii=False).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def test_rest_entity_search(mesh, library):
    status, body = await asyncio.to_thread(_post, mesh.rest_url + "/v1/entities:search", {"query": "土豆", "topK": 3})
    assert status == 200 and body["entities"][0]["name"] == "马铃薯"
    assert body["entities"][0]["scoreBreakdown"] and body["entities"][0]["evidence"]
    status, body = await asyncio.to_thread(_post, mesh.rest_url + "/v1/entities:search", {"query": ""})
    assert status == 400


async def test_rerank_without_a_model_degrades_and_keeps_the_exact_hit_first(mesh, stub, library):
    from services.gateway.config import GatewaySettings
    from tests.fixtures.mesh import extra_gateway

    async with extra_gateway(mesh, GatewaySettings(port=0, rest={"port": -1}, rerank={"enabled": True})) as gw:
        reply = await gw.SearchEntities(gateway_pb2.SearchEntitiesRequest(query="马铃薯", top_k=5), timeout=30)
    assert reply.entities[0].name == "马铃薯"
    assert "reranker" in reply.degraded  # the test mesh's reranker has no model
    rerank = next(t for t in reply.timings if t.stage == "rerank")
    assert rerank.status == types_pb2.STAGE_STATUS_DEGRADED
    # the default gateway reports the stage as skipped
    plain = await search(stub, "马铃薯")
    assert any(t.stage == "rerank" and t.status == types_pb2.STAGE_STATUS_SKIPPED for t in plain.timings)


async def test_long_value_lists_and_nul_queries_get_clear_answers(stub, library):
    values = "、".join(f"症{chr(0x4e00 + i)}" for i in range(60))  # 60 listed values, more than the graph takes
    reply = await search(stub, f"症状：发热、头痛、{values}")
    # The list is cut to the first 50 values, not refused: the graph's
    # attribute search runs and answers (the 58 unknown values leave no
    # entity with enough coverage to pass the gate).
    assert not reply.degraded and reply.route == "attribute"
    graph = next(t for t in reply.timings if t.stage == "retrieve_entities.graph")
    assert graph.status == types_pb2.STAGE_STATUS_OK
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await search(stub, "马铃\u0000薯")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(err.value)[0][0] == "query"
