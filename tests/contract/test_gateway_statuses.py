"""Status codes at the gateway's gRPC boundary: its real servicer behind a
real grpc.aio server on port 0, the downstream services faked. A downstream
INVALID_ARGUMENT stays INVALID_ARGUMENT with its BadRequest (never INTERNAL),
and streaming RPCs get the same error translation as unary ones."""
from __future__ import annotations

import grpc
import pytest
import pytest_asyncio

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.errors import field_violations
from services.common.server import Service, create_server
from services.gateway.servicer import GatewayServicer
from services.gateway.server import use_cases
from services.gateway.config import GatewaySettings
from tests.fakes import FakeExpander, FakeFuser, FakeLlm, FakeReranker, FakeRetriever, candidate

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(loop_scope="session")
async def gateway():
    """Starts a gateway over fakes; yields a function (pg fail, graph fail)
    -> stub of a fresh server."""
    servers, channels = [], []

    async def start(pg_fail=None, graph_fail=None, expander_fail=None):
        settings = GatewaySettings(port=0, rest_port=-1, retrieve_timeout=0.5)
        use = use_cases(
            settings, FakeExpander(fail=expander_fail),
            [FakeRetriever("retriever_pg", [candidate("1", "第一条 测试。", "pg.keyword", 1.0, 0.9)], fail=pg_fail),
             FakeRetriever("retriever_graph", fail=graph_fail)],
            FakeReranker(), FakeFuser(), FakeLlm())
        servicer = GatewayServicer(settings, use)
        service = Service("gateway", [gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"].full_name],
                          lambda server: gateway_pb2_grpc.add_GatewayServiceServicer_to_server(servicer, server))
        server, port, _ = await create_server(service)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        servers.append(server)
        channels.append(channel)
        return gateway_pb2_grpc.GatewayServiceStub(channel)

    yield start
    for channel in channels:
        await channel.close()
    for server in servers:
        await server.stop(0)


async def test_downstream_invalid_argument_is_not_internal(gateway):
    stub = await gateway(pg_fail=grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(gateway_pb2.SearchRequest(query="测试"), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(err.value) == [("query", "is wrong")]
    assert err.value.details().startswith("retriever_pg: ")


async def test_expander_invalid_argument_reaches_answer_callers_too(gateway):
    stub = await gateway(expander_fail=grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Answer(gateway_pb2.AnswerRequest(query="测试"), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(err.value)[0][0] == "query"


async def test_no_retriever_answering_is_unavailable_not_internal(gateway):
    stub = await gateway(pg_fail=grpc.StatusCode.UNAVAILABLE, graph_fail=grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(gateway_pb2.SearchRequest(query="测试"), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_stream_bad_input_is_invalid_argument_through_the_interceptor(gateway):
    stub = await gateway()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query=" "), timeout=10):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(err.value)[0][0] == "query"


async def test_stream_downstream_invalid_argument_passes_through(gateway):
    stub = await gateway(expander_fail=grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query="测试"), timeout=10):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_healthy_stream_ends_with_the_answer(gateway):
    stub = await gateway()
    events = [e async for e in stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query="测试"), timeout=10)]
    assert events[-1].HasField("done") and events[-1].done.citations[0].document_id == "1"
    assert any(e.HasField("stage") and e.stage.stage == "strategy.standard" for e in events)
