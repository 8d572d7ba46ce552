"""The MCP server (services/mcp_server), started as `graphmesh mcp` would be
(python -m services.mcp_server) and driven with the MCP SDK's own client
over both transports, stdio and streamable HTTP, against the real gateway
(servicer, interceptors) over fake downstream clients: the seven tools with
their schemas, results from the gateway, errors a model can read, and
ingest_text refused without the key when the gateway's auth is on."""
from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from graphmesh.common.v1 import types_pb2
from services.gateway.api.auth import new_key
from tests.fakes import FakeLlm, FakeRetriever, candidate, entity

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]
REPO = Path(__file__).resolve().parents[2]
TOOLS = {"search", "answer", "search_entities", "list_collections", "get_document", "ingest_text", "delete_document"}


def server_env(gateway_address: str, api_key: str = "") -> dict[str, str]:
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "gen" / "python")]),
           "GRAPHMESH_GATEWAY_ADDR": gateway_address, "GRAPHMESH_API_KEY": api_key,
           "GRAPHMESH_MESH_TOKEN": "", "GRAPHMESH_HOME": os.environ.get("GRAPHMESH_HOME", str(REPO / ".graphmesh-test"))}
    return env


def stdio(gateway_address: str, api_key: str = "") -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "services.mcp_server"], cwd=str(REPO),
                                 env=server_env(gateway_address, api_key))


@contextlib.asynccontextmanager
async def http_server(gateway_address: str, api_key: str = ""):
    """`graphmesh mcp --transport http` on a free port; yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.mcp_server", "--transport", "http", "--port", str(port), cwd=str(REPO),
        env={**os.environ, **server_env(gateway_address, api_key)}, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL)
    try:
        for _ in range(300):  # up to 30 s on a busy machine
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                if proc.returncode is not None:
                    raise RuntimeError(f"the MCP server exited with {proc.returncode}")
                await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), 10)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def stocked_pg() -> FakeRetriever:
    pg = FakeRetriever("retriever_pg", [candidate("1", "第一条 测试。", "pg.keyword", 1.0, 0.9)])
    pg.collections = [types_pb2.CollectionInfo(name="default", documents=1, chunks=1, domain_pack="generic")]
    pg.documents = [types_pb2.StoredDocument(id="1", collection="default", title="测试法", chunk_count=1,
                                             metadata={"year": "2024"})]
    return pg


async def exercise(client: Client) -> None:
    """Every tool once, through ``client``."""
    listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object" and tool.output_schema
    assert tools["search"].input_schema["required"] == ["query"]
    assert tools["search"].input_schema["properties"]["top_k"]["maximum"] == 100
    assert tools["ingest_text"].annotations.read_only_hint is False and tools["search"].annotations.read_only_hint

    found = await client.call_tool("search", {"query": "测试", "top_k": 3})
    assert not found.is_error, found.content
    hit = found.structured_content["results"][0]
    assert hit["document_id"] == "1" and hit["label"] == "测试法 第一条" and "pg.keyword" in hit["channels"]

    answered = await client.call_tool("answer", {"query": "测试是什么？"})
    assert not answered.is_error, answered.content
    assert "[1]" in answered.structured_content["answer"] and answered.structured_content["mode"] == "llm"
    assert answered.structured_content["citations"][0]["document_id"] == "1"

    collections = await client.call_tool("list_collections", {})
    assert collections.structured_content["collections"][0]["name"] == "default"

    document = await client.call_tool("get_document", {"document_id": "1"})
    assert not document.is_error, document.content
    assert document.structured_content["title"] == "测试法" and document.structured_content["metadata"] == {"year": "2024"}

    entities = await client.call_tool("search_entities", {"query": "西红柿"})
    assert not entities.is_error, entities.content
    assert [e["name"] for e in entities.structured_content["entities"]] == ["番茄"]

    stored = await client.call_tool("ingest_text", {"text": "第二条 新的条文。", "document_id": "mcp-1", "title": "新法",
                                                    "metadata": {"year": 2025, "status": "现行有效"}})  # a number as text
    assert not stored.is_error, stored.content
    assert stored.structured_content["stored"] and stored.structured_content["document_id"] == "mcp-1"
    dotted = await client.call_tool("ingest_text", {"text": "第三条。", "document_id": "a/../b"})
    # the gateway's "jsonl[0].id" is named as the argument the agent wrote
    assert dotted.is_error and "document_id" in dotted.content[0].text and "jsonl" not in dotted.content[0].text
    # a trial's agent could add a text and never take it back
    assert tools["delete_document"].annotations.destructive_hint is True
    deleted = await client.call_tool("delete_document", {"document_id": "mcp-1"})
    assert not deleted.is_error, deleted.content
    assert deleted.structured_content["document_ids"] == ["mcp-1"] and deleted.structured_content["deleted_documents"] == 1

    refused = await client.call_tool("search", {"query": "测试", "filter": "year != 3"})
    assert refused.is_error and "INVALID_ARGUMENT" in refused.content[0].text and "filter" in refused.content[0].text
    misspelt = await client.call_tool("search", {"query": "测试", "topk": 3})  # not dropped while top_k keeps 5
    assert misspelt.is_error and "topk: not an argument; did you mean top_k?" in misspelt.content[0].text, misspelt.content
    assert tools["search"].input_schema["additionalProperties"] is False
    too_many = await client.call_tool("search", {"query": "测试", "top_k": 1000})
    assert too_many.is_error  # the published schema's bound, checked by the SDK
    missing = await client.call_tool("get_document", {"document_id": "nosuch"})
    assert missing.is_error and "NOT_FOUND" in missing.content[0].text


async def gateway_for_tools(fake_gateway, **overrides):
    graph = FakeRetriever("retriever_graph", entities=[entity("番茄")])
    return await fake_gateway(pg=stocked_pg(), graph=graph, llm=FakeLlm(enabled=True, answer="根据[1]，测试。"), **overrides)


async def test_every_tool_over_stdio(fake_gateway):
    gw = await gateway_for_tools(fake_gateway)
    async with Client(stdio(gw.address)) as client:
        await exercise(client)


async def test_every_tool_over_streamable_http(fake_gateway):
    gw = await gateway_for_tools(fake_gateway)
    async with http_server(gw.address) as url, Client(url) as client:
        await exercise(client)


async def test_with_auth_on_only_the_servers_key_lets_it_read_and_write(fake_gateway):
    key, record = new_key("mcp")
    gw = await gateway_for_tools(fake_gateway, auth={"enabled": True, "api_keys": record.line()})
    async with Client(stdio(gw.address)) as client:  # started without a key
        refused = await client.call_tool("ingest_text", {"text": "第三条。", "document_id": "mcp-2"})
        assert refused.is_error and "UNAUTHENTICATED" in refused.content[0].text
        assert "GRAPHMESH_API_KEY" in refused.content[0].text
        assert (await client.call_tool("search", {"query": "测试"})).is_error
    async with http_server(gw.address, key) as url, Client(url) as client:
        stored = await client.call_tool("ingest_text", {"text": "第三条。", "document_id": "mcp-2"})
        assert not stored.is_error and stored.structured_content["stored"], stored.content
        assert not (await client.call_tool("search", {"query": "测试"})).is_error


async def test_http_says_ready_only_once_it_listens_and_refuses_a_taken_or_impossible_port():
    """A trial's --port on a taken port printed READY and then a bind error; --port 99999, READY and a traceback."""
    async def run(*args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.mcp_server", "--transport", "http", *args, cwd=str(REPO),
            env={**os.environ, **server_env("127.0.0.1:9")}, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode, err.decode()

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, err = await run("--port", str(taken.getsockname()[1]))
    assert code == 3 and "READY" not in err and "error: cannot listen on 127.0.0.1" in err and "Traceback" not in err, err
    code, err = await run("--port", "99999")
    assert code == 2 and "must be a port from 1 to 65535" in err and "READY" not in err, err
