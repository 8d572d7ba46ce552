"""The integrations end to end, against the real mesh (PostgreSQL+pgvector,
Neo4j, every service on loopback): an MCP client (the SDK's, over stdio)
ingests a text with ingest_text and finds it with search, and answers a law
question with its citation; the ``openai`` client asks the same question at
the gateway's REST port, streamed and not, and gets the cited article."""
from __future__ import annotations

import grpc
import openai
import pytest
import pytest_asyncio
from mcp import Client

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from tests.mcp_server.test_server import stdio
from tests.e2e.test_gateway_e2e import SAMPLE, TWO_X_WAGES

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def laws(mesh):
    async with grpc.aio.insecure_channel(mesh.gateway) as channel:
        stub = gateway_pb2_grpc.GatewayServiceStub(channel)
        await stub.Ingest(gateway_pb2.IngestRequest(jsonl=SAMPLE.read_bytes(), domain_pack="law_zh"), timeout=300)
    return mesh


async def test_an_mcp_client_ingests_a_text_then_finds_it_and_answers_with_a_citation(laws):
    async with Client(stdio(laws.gateway)) as client:
        stored = await client.call_tool("ingest_text", {
            "text": "第一条 为规范灵活办公，员工每周可申请两天远程办公。\n第二条 远程办公须提前一日报部门负责人批准。",
            "document_id": "mcp-remote-work", "title": "远程办公管理办法", "collection": "handbook"})
        assert not stored.is_error and stored.structured_content["stored"], stored.content
        found = await client.call_tool("search", {"query": "每周可以远程办公几天？", "collections": ["handbook"], "top_k": 3})
        assert found.structured_content["results"][0]["document_id"] == "mcp-remote-work", found.structured_content
        collections = {c["name"] for c in (await client.call_tool("list_collections", {})).structured_content["collections"]}
        assert {"default", "handbook"} <= collections
        answered = await client.call_tool("answer", {"query": TWO_X_WAGES, "top_k": 5})
        assert not answered.is_error, answered.content
        assert "5689" in {c["document_id"] for c in answered.structured_content["citations"]}, answered.structured_content
        document = await client.call_tool("get_document", {"document_id": "5689"})
        assert document.structured_content["collection"] == "default"


async def test_the_openai_client_gets_the_cited_article_streamed_and_not(laws):
    client = openai.AsyncOpenAI(base_url=laws.rest_url + "/v1", api_key="unused", max_retries=0, timeout=120)
    assert "graphmesh" in {m.id for m in (await client.models.list()).data}
    messages = [{"role": "user", "content": TWO_X_WAGES}]
    reply = await client.chat.completions.create(model="graphmesh", messages=messages)
    message = reply.choices[0].message
    assert "5689" in {c["document_id"] for c in message.citations}, reply
    assert f"[{next(c['number'] for c in message.citations if c['document_id'] == '5689')}]" in message.content
    chunks = [c async for c in await client.chat.completions.create(model="graphmesh:default", messages=messages, stream=True)]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert "5689" in {c["document_id"] for c in chunks[-1].choices[0].delta.citations}
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == chunks[-1].graphmesh["answer"]  # extractive: one delta
