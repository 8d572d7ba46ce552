"""End to end through the gateway, over gRPC and over REST, against real
PostgreSQL+pgvector, real Neo4j and real gRPC servers on loopback."""
from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.errors import field_violations
from services.gateway.config import GatewaySettings, RetrievalProfile
from tests.fixtures.mesh import extra_gateway

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "law_sample.jsonl"
TWO_X_WAGES = "用人单位超过一个月不满一年未与劳动者订立书面劳动合同，应当向劳动者每月支付多少工资？"
pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stub(mesh):
    channel = grpc.aio.insecure_channel(mesh.gateway)
    yield gateway_pb2_grpc.GatewayServiceStub(channel)
    await channel.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ingested(stub):
    reply = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=SAMPLE.read_bytes(), domain_pack="law_zh"), timeout=300)
    return reply


def _rest_blocking(mesh, path: str, body: object) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    request = urllib.request.Request(mesh.rest_url + path, data=data, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def rest(mesh, path: str, body: object) -> tuple[int, dict]:
    """POSTs JSON from a worker thread (the servers share this event loop)."""
    return await asyncio.to_thread(_rest_blocking, mesh, path, body)


async def test_ingest_stores_every_article_then_is_idempotent(stub, ingested):
    n = sum(1 for line in SAMPLE.read_text().splitlines() if line.strip())
    assert ingested.received == n
    assert ingested.stored == n and not ingested.failures
    assert ingested.chunks >= n
    again = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=SAMPLE.read_bytes(), domain_pack="law_zh"), timeout=300)
    assert again.unchanged == n and again.stored == 0


async def test_search_over_grpc_finds_the_article_with_channels_context_and_timings(stub, ingested):
    reply = await stub.Search(gateway_pb2.SearchRequest(query=TWO_X_WAGES, top_k=5), timeout=60)
    assert reply.results, reply
    top_docs = [c.document_id for c in reply.results[:3]]
    assert "5689" in top_docs  # 劳动合同法 第八十二条
    best = next(c for c in reply.results if c.document_id == "5689")
    channels = {s.channel for s in best.channel_scores}
    assert {"pg.vector", "pg.keyword"} <= channels
    assert reply.context.startswith("[1] ")
    stages = {t.stage: t for t in reply.timings}
    for stage in ("expand", "retrieve.pg", "retrieve.graph", "fuse", "total"):
        assert stages[stage].status == types_pb2.STAGE_STATUS_OK, stage
    assert stages["rerank"].status == types_pb2.STAGE_STATUS_SKIPPED
    assert not reply.degraded
    assert reply.query_info.keywords


async def test_answer_is_extractive_with_valid_citations(stub, ingested):
    reply = await stub.Answer(gateway_pb2.AnswerRequest(query=TWO_X_WAGES, top_k=5), timeout=60)
    assert reply.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE
    assert "[1]" in reply.answer
    assert reply.citations and all(c.number >= 1 for c in reply.citations)
    assert any(c.document_id == "5689" for c in reply.citations)


async def test_rest_search_and_answer(mesh, ingested):
    status, body = await rest(mesh, "/v1/query:search", {"query": TWO_X_WAGES, "topK": 3})
    assert status == 200, body
    assert len(body["results"]) == 3 and body["results"][0]["documentId"]
    status, body = await rest(mesh, "/v1/query:answer", {"query": TWO_X_WAGES})
    assert status == 200 and body["mode"] == "ANSWER_MODE_EXTRACTIVE" and body["answer"]


async def test_question_the_corpus_does_not_answer_abstains(stub, ingested):
    reply = await stub.Answer(gateway_pb2.AnswerRequest(query="红烧肉怎么做才能肥而不腻？", top_k=5), timeout=60)
    assert reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED
    assert not reply.citations and "[1]" not in reply.answer and "资料不足" in reply.answer
    assert reply.insufficient_sources and reply.answerability < reply.answerability_threshold


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   \t "}, "query"),
        ({"query": "劳" * 10_001}, "query"),
        ({"query": "专利", "topK": 0 - 1}, "top_k"),
        ({"query": "专利", "topK": 101}, "top_k"),
        ({"query": "专利", "bogus": 1}, "bogus"),
        ({"query": "专利", "topK": "ten"}, "top_k"),  # the proto name, as the servicer's own errors say
        ({"query": "专利", "top_k": "ten"}, "top_k"),
        (None, "body"),
        ([], "body"),
    ],
)
async def test_rest_bad_input_is_400_naming_the_field(mesh, body, field):
    status, reply = await rest(mesh, "/v1/query:search", body)
    assert status == 400, reply
    assert reply["error"]["status"] == "INVALID_ARGUMENT"
    fields = [v["field"] for d in reply["error"]["details"] for v in d.get("fieldViolations", [])]
    assert field in fields


async def test_rest_non_utf8_body_is_400(mesh):
    status, reply = await rest(mesh, "/v1/query:search", b'{"query": "\xff\xfe"}')
    assert status == 400 and reply["error"]["status"] == "INVALID_ARGUMENT"


async def test_grpc_bad_input_is_invalid_argument_with_bad_request(stub):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(gateway_pb2.SearchRequest(query=" "), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(err.value)[0][0] == "query"


async def test_ingest_reports_bad_records_and_stores_the_rest(stub, ingested):
    payload = b"\n".join([
        '{"id": "extra-1", "title": "测试文件", "text": "这是一条可以存储的测试文本。"}'.encode(),
        b'{"id": "extra-2", "text": ""}',
        b"\xff\xfe\xfd",
    ])
    reply = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=payload), timeout=120)
    assert reply.received == 3 and reply.stored == 1
    reasons = {f.index: f.reason for f in reply.failures}
    assert "text" in reasons[1] and "UTF-8" in reasons[2]


async def test_ingest_with_no_readable_record_is_invalid_argument(stub):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Ingest(gateway_pb2.IngestRequest(jsonl=b'{"id": "x"}'), timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(err.value)[0][0] == "jsonl[0].text"


async def test_ingest_of_an_unknown_kind_is_invalid_argument(stub):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Ingest(gateway_pb2.IngestRequest(jsonl=b'{"id": "x", "text": "t"}', kind=99), timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(err.value)[0][0] == "kind"


@pytest.mark.parametrize(
    "query",
    ["'; DROP TABLE chunks; --", "MATCH (n) DETACH DELETE n", 'a:b AND (c " \\ 劳动合同', "劳动合同 😀🔥",
     "\\\\'\"` 劳动合同", "\\\\'\"`"],
)
async def test_hostile_queries_are_searched_as_text_and_nothing_is_lost(stub, ingested, query):
    if any(ch.isalnum() for ch in query):
        await stub.Search(gateway_pb2.SearchRequest(query=query, top_k=3), timeout=60)
    else:  # only punctuation: nothing to search for, refused naming the field
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Search(gateway_pb2.SearchRequest(query=query, top_k=3), timeout=60)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and err.value.details().startswith("query: ")
    reply = await stub.Search(gateway_pb2.SearchRequest(query=TWO_X_WAGES, top_k=3), timeout=60)
    assert "5689" in [c.document_id for c in reply.results]
    assert not reply.degraded


async def test_graph_down_degrades_instead_of_failing(mesh, ingested):
    from services.common.server import create_server
    from services.common.settings import MeshAddresses
    from services.gateway.config import GatewaySettings
    from services.gateway.server import build
    from tests.fixtures.mesh import refused_address

    addresses = {f"{n}_addr": a for n, a in mesh.addresses.items() if n != "gateway"}
    addresses["retriever_graph_addr"] = refused_address()
    service, _ = await build(GatewaySettings(port=0, rest={"port": -1}), MeshAddresses(**addresses))
    server, port, _ = await create_server(service)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Search(gateway_pb2.SearchRequest(query=TWO_X_WAGES), timeout=30)
        assert reply.degraded == ["retriever_graph"]
        assert reply.results and "5689" in [c.document_id for c in reply.results[:3]]
        graph = next(t for t in reply.timings if t.stage == "retrieve.graph")
        assert graph.status == types_pb2.STAGE_STATUS_DEGRADED and graph.detail
    finally:
        await server.stop(0)
        await service.on_stop()


async def test_metrics_expose_rpc_counters_and_stage_histogram(stub, ingested):
    from prometheus_client import generate_latest

    await stub.Search(gateway_pb2.SearchRequest(query=TWO_X_WAGES, top_k=3), timeout=60)
    text = generate_latest().decode()
    assert 'grpc_server_handled_total{grpc_code="OK",grpc_method="Search",grpc_service="graphmesh.gateway.v1.GatewayService",grpc_type="unary"}' in text
    assert 'grpc_client_handled_total{grpc_code="OK",grpc_method="Retrieve"' in text
    assert 'graphmesh_stage_duration_seconds_bucket{le="0.001",stage="fuse",status="ok"}' in text


async def test_disabled_stages_switch_channels_off_and_unknown_is_rejected(stub, ingested):
    reply = await stub.Search(gateway_pb2.SearchRequest(query=TWO_X_WAGES, top_k=10, disabled_stages=["pg.vector", "graph"]), timeout=60)
    channels = {s.channel for c in reply.results for s in c.channel_scores}
    assert channels and "pg.vector" not in channels and not any(c.startswith("graph.") for c in channels)
    assert reply.query_info.profile == "default"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(gateway_pb2.SearchRequest(query=TWO_X_WAGES, disabled_stages=["bogus"]), timeout=10)
    assert field_violations(err.value)[0][0] == "disabled_stages"


async def test_hyde_profile_is_reported_skipped_without_llm(mesh, ingested):
    settings = GatewaySettings(port=0, rest={"port": -1},
                               profiles={"default": RetrievalProfile(hyde=True, mmr_lambda=0.7)})
    async with extra_gateway(mesh, settings) as gw:
        reply = await gw.Search(gateway_pb2.SearchRequest(query=TWO_X_WAGES), timeout=30)
    hyde = next(t for t in reply.timings if t.stage == "hyde")
    assert hyde.status == types_pb2.STAGE_STATUS_SKIPPED and "LLM" in hyde.detail
    assert reply.results and not reply.degraded  # MMR profile still answers


async def test_expansion_profile_adds_heading_terms_with_their_origin(mesh, ingested):
    settings = GatewaySettings(port=0, rest={"port": -1}, profiles={"default": RetrievalProfile(expansions=True)})
    async with extra_gateway(mesh, settings) as gw:
        reply = await gw.Search(gateway_pb2.SearchRequest(query=TWO_X_WAGES), timeout=30)
        plain = await gw.Search(gateway_pb2.SearchRequest(query=TWO_X_WAGES, disabled_stages=["expansion"]), timeout=30)
    assert reply.query_info.expansions, reply.query_info
    assert all(re.fullmatch(r".+ \((entity_name|entity_description|heading): .+\)", e) for e in reply.query_info.expansions)
    assert not plain.query_info.expansions
    assert any(t.stage == "expansion" and t.status == types_pb2.STAGE_STATUS_OK for t in reply.timings)
    assert reply.results


async def test_rest_ingest_takes_base64_jsonl_and_reports_failures(mesh, ingested):
    import base64

    payload = '{"id": "rest-1", "title": "测试法", "text": "第一条 通过REST写入的测试条文。"}\n{"id": "rest-2"}'.encode()
    status, body = await rest(mesh, "/v1/documents:ingest", {"jsonl": base64.b64encode(payload).decode()})
    assert status == 200, body
    assert body["received"] == 2 and body["stored"] == 1
    assert [f["index"] for f in body["failures"]] == [1] and "text" in body["failures"][0]["reason"]
    status, body = await rest(mesh, "/v1/documents:ingest", {"jsonl": base64.b64encode(b'{"id": "x"}').decode()})
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"


async def test_rest_deep_search_iterates_and_answers(mesh, ingested):
    status, body = await rest(mesh, "/v1/query:deepSearch", {"query": TWO_X_WAGES, "topK": 5, "maxIterations": 1})
    assert status == 200, body
    assert len(body["iterations"]) == 1 and body["stopReason"] == "max iterations 1"
    assert body["answer"]["mode"] == "ANSWER_MODE_EXTRACTIVE" and body["evidenceIds"]
    status, body = await rest(mesh, "/v1/query:deepSearch", {"query": TWO_X_WAGES, "maxIterations": 9})
    assert status == 400 and body["error"]["details"][-1]["fieldViolations"][0]["field"] == "max_iterations"


async def test_retrieve_split_in_two_parts_merges_to_the_combined_reply(mesh, ingested):
    """The gateway's split retrieval against the real retriever_pg: the
    keyword part and the vector part, merged, are the combined reply."""
    from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
    from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
    from services.gateway.search.split_retrieval import keyword_part, merge_parts, vector_part

    async with grpc.aio.insecure_channel(mesh.addresses["expander"]) as ex_channel, \
            grpc.aio.insecure_channel(mesh.addresses["retriever_pg"]) as pg_channel:
        expanded = await expander_pb2_grpc.ExpanderServiceStub(ex_channel).Expand(
            expander_pb2.ExpandRequest(query=TWO_X_WAGES, embed=True, domain_packs=["law_zh"]), timeout=60)
        pg = retriever_pb2_grpc.RetrieverServiceStub(pg_channel)
        combined = retriever_pb2.RetrieveRequest(query=expanded.normalized_query, keywords=expanded.keywords,
                                                 query_embedding=expanded.embedding, top_k=20, parent_context_tokens=64)
        whole = await pg.Retrieve(combined, timeout=60)
        keywords = await pg.Retrieve(keyword_part(combined), timeout=60)
        vectors = await pg.Retrieve(vector_part(combined, expanded.embedding), timeout=60)
    channels = {s.channel for c in whole.candidates for s in c.channel_scores}
    assert {"pg.vector", "pg.keyword"} <= channels
    assert {s.channel for c in vectors.candidates for s in c.channel_scores} == {"pg.vector"}
    assert "pg.vector" not in {s.channel for c in keywords.candidates for s in c.channel_scores}
    assert merge_parts(vectors.candidates, keywords.candidates) == list(whole.candidates)
