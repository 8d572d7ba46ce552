"""Domain packs end to end over the real mesh (gRPC servers on loopback,
PostgreSQL+pgvector, Neo4j): a collection keeps the pack it was created
with, a generic collection's ingest and search run no statute code (the
law pack's own call counter, domains.law_zh.USAGE, does not move), and a
law_zh collection's documents get their statute facts."""
from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from neo4j import AsyncGraphDatabase

import domains
from domains.law_zh import USAGE
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.e2e]
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "law_sample.jsonl"
# A handbook whose text reads like a statute ("第三条", "依照本法"): a generic
# collection must still not parse it as one.
HANDBOOK = ('{"id": "hb-1", "title": "员工手册", "text": "第三条 员工依照本法第五条的规定申请年假。犯盗窃罪的员工予以辞退。"}\n'
            '{"id": "hb-2", "title": "员工手册", "text": "第四条 年假天数按工龄计算，满一年不满十年的，年假五天。"}').encode()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stub(mesh):
    async with grpc.aio.insecure_channel(mesh.gateway) as channel:
        yield gateway_pb2_grpc.GatewayServiceStub(channel)


async def test_a_generic_collection_runs_no_statute_code_on_ingest_or_search(stub, mesh):
    before = dict(USAGE)
    reply = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=HANDBOOK, collection="handbook"), timeout=120)
    assert reply.stored == 2 and not reply.failures
    await asyncio.sleep(0.5)
    for query in ("员工手册第三条是什么", "被告人犯盗窃罪，公诉机关指控", "我想请年假怎么办？"):
        found = await stub.Search(gateway_pb2.SearchRequest(query=query, collections=["handbook"], top_k=3), timeout=60)
        assert found.results
        assert found.query_info.question_type not in domains.LAW_ZH.question_types
        assert not any(s.channel in domains.LAW_ZH.channels for r in found.results for s in r.channel_scores)
    assert dict(USAGE) == before
    listed = await stub.ListCollections(gateway_pb2.ListCollectionsRequest(), timeout=30)
    assert {c.name: c.domain_pack for c in listed.collections}["handbook"] == "generic"
    driver = AsyncGraphDatabase.driver(mesh.neo4j_uri, auth=None)
    try:
        rows = (await driver.execute_query("MATCH (d:Document) WHERE d.collection = 'handbook' "
                                           "RETURN d.law_key AS law, d.offences AS offences")).records
    finally:
        await driver.close()
    assert rows and all(r["law"] is None and not r["offences"] for r in rows)


async def test_a_law_collection_gets_statute_facts_and_keeps_its_pack(stub, mesh):
    before = USAGE["document_facts"]
    reply = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=SAMPLE.read_bytes(), collection="statutes",
                                                        domain_pack="law_zh"), timeout=300)
    assert reply.stored + reply.unchanged > 100
    assert USAGE["document_facts"] > before
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Ingest(gateway_pb2.IngestRequest(jsonl=HANDBOOK, collection="statutes", domain_pack="generic"), timeout=60)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "domain_pack" in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Ingest(gateway_pb2.IngestRequest(jsonl=HANDBOOK, collection="other", domain_pack="no_such"), timeout=60)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    classified = USAGE["classify"]
    found = await stub.Search(gateway_pb2.SearchRequest(query="中华人民共和国劳动合同法第十条", collections=["statutes"], top_k=3),
                              timeout=60)
    assert USAGE["classify"] > classified
    assert found.query_info.question_type == "QUESTION_TYPE_ARTICLE_LOOKUP"


async def test_the_packs_are_listed(stub):
    reply = await stub.ListDomainPacks(gateway_pb2.ListDomainPacksRequest(), timeout=30)
    packs = {p.name: p for p in reply.packs}
    assert set(packs) == set(domains.PACKS)
    assert "QUESTION_TYPE_CASE_FACTS" in packs["law_zh"].question_types and "graph.offence" in packs["law_zh"].channels
    assert not packs["generic"].question_types and packs["law_zh"].recipe_source
