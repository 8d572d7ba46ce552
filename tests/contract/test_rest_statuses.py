"""HTTP statuses of the REST transcoder beyond 400: the real REST app over a
real gateway gRPC server whose downstream services are fakes. Each status
comes from the gRPC code the gateway answered (AIP-193 mapping), in the
google.rpc.Status JSON shape; a failure after a stream has started is sent
as a last error event."""
from __future__ import annotations

import json

import grpc
import pytest
import pytest_asyncio
from aiohttp import ClientSession, web

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.server import Service, create_server
from services.gateway.config import GatewaySettings
from services.gateway.rest import HTTP_STATUS, build_app
from services.gateway.server import use_cases
from services.gateway.servicer import GatewayServicer
from tests.fakes import FakeExpander, FakeFuser, FakeLlm, FakeReranker, FakeRetriever, candidate

pytestmark = pytest.mark.asyncio(loop_scope="session")


class BrokenFuser(FakeFuser):
    """A fuser whose client raises a plain bug (not a DownstreamError)."""

    async def fuse(self, request, timeout):
        raise RuntimeError("bug in the fake")


class StreamThenFail(FakeLlm):
    """An LLM that writes one piece, then breaks with an unexpected error."""

    async def stream(self, messages, max_tokens, timeout=None, purpose="answer"):
        yield "应当"
        raise RuntimeError("connection torn in the fake")


@pytest_asyncio.fixture(loop_scope="session")
async def rest():
    """Starts gateway + REST over fakes; yields start(**fakes) -> base URL."""
    started = []

    async def start(pg=None, graph=None, fuser=None, llm=None) -> str:
        settings = GatewaySettings(port=0, rest_port=-1, retrieve_timeout=0.3)
        use = use_cases(settings, FakeExpander(),
                        [pg or FakeRetriever("retriever_pg", [candidate("1", "第一条 测试。", "pg.keyword", 1.0, 0.9)]),
                         graph or FakeRetriever("retriever_graph")],
                        FakeReranker(), fuser or FakeFuser(), llm or FakeLlm())
        servicer = GatewayServicer(settings, use)
        service = Service("gateway", [gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"].full_name],
                          lambda server: gateway_pb2_grpc.add_GatewayServiceServicer_to_server(servicer, server))
        server, port, _ = await create_server(service)
        runner = web.AppRunner(build_app(f"127.0.0.1:{port}"))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        started.append((server, runner))
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for server, runner in started:
        await runner.cleanup()
        await server.stop(0)


async def post(url: str, body: object, accept: str = "application/json") -> tuple[int, str]:
    async with ClientSession() as session:
        async with session.post(url, data=json.dumps(body, ensure_ascii=False), headers={"Accept": accept}) as reply:
            return reply.status, await reply.text()


async def test_no_retriever_answering_is_503(rest):
    url = await rest(pg=FakeRetriever("retriever_pg", fail=grpc.StatusCode.UNAVAILABLE),
                     graph=FakeRetriever("retriever_graph", fail=grpc.StatusCode.UNAVAILABLE))
    status, body = await post(url + "/v1/query:search", {"query": "测试"})
    error = json.loads(body)["error"]
    assert status == 503 and error["status"] == "UNAVAILABLE" and "retriever_pg" in error["message"]


async def test_every_retriever_timing_out_is_504(rest):
    url = await rest(pg=FakeRetriever("retriever_pg", fail="hang"), graph=FakeRetriever("retriever_graph", fail="hang"))
    status, body = await post(url + "/v1/query:search", {"query": "测试"})
    assert status == 504 and json.loads(body)["error"]["status"] == "DEADLINE_EXCEEDED"


async def test_an_unexpected_error_is_500_without_a_trace(rest):
    url = await rest(fuser=BrokenFuser())
    status, body = await post(url + "/v1/query:search", {"query": "测试"})
    error = json.loads(body)["error"]
    assert status == 500 and error["status"] == "INTERNAL"
    assert "Traceback" not in body and "bug in the fake" not in body


async def test_unknown_route_and_method_answer_json(rest):
    url = await rest()
    status, body = await post(url + "/v1/query:nothing", {"query": "测试"})
    assert status == 404 and json.loads(body)["error"]["status"] == "NOT_FOUND"
    async with ClientSession() as session:
        async with session.get(url + "/v1/query:search") as reply:
            assert reply.status == 405 and (await reply.json())["error"]["status"] == "METHOD_NOT_ALLOWED"


async def test_error_after_the_stream_started_is_the_last_event(rest):
    url = await rest(llm=StreamThenFail(enabled=True))
    status, body = await post(url + "/v1/query:answerStream", {"query": "测试"}, accept="text/event-stream")
    events = [json.loads(line[len("data: "):]) for line in body.splitlines() if line.startswith("data: ")]
    assert status == 200 and events[0].get("stage")  # the stream had started
    assert any(e.get("token") == "应当" for e in events)
    assert events[-1]["error"]["status"] == "INTERNAL" and events[-1]["error"]["code"] == 500


async def test_status_table_follows_aip_193():
    assert HTTP_STATUS[grpc.StatusCode.NOT_FOUND] == 404
    assert HTTP_STATUS[grpc.StatusCode.RESOURCE_EXHAUSTED] == 429
    assert HTTP_STATUS[grpc.StatusCode.UNAUTHENTICATED] == 401
    assert HTTP_STATUS[grpc.StatusCode.FAILED_PRECONDITION] == 400
