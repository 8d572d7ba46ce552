"""Status codes at the gateway's gRPC boundary: its real servicer behind a
real grpc.aio server on port 0, the downstream services faked. A downstream
INVALID_ARGUMENT stays INVALID_ARGUMENT with its BadRequest (never INTERNAL),
and streaming RPCs get the same error translation as unary ones."""
from __future__ import annotations

import grpc
import pytest

from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import field_violations
from tests.fakes import FakeExpander, FakeRetriever
from tests.fixtures.fake_gateway import ARTICLE

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def gateway(fake_gateway, pg_fail=None, graph_fail=None, expander_fail=None):
    """The stub of a gateway over fakes that fail as told."""
    gw = await fake_gateway(rest={"port": -1}, expander=FakeExpander(fail=expander_fail),
                            pg=FakeRetriever("retriever_pg", [ARTICLE], fail=pg_fail),
                            graph=FakeRetriever("retriever_graph", fail=graph_fail))
    return gw.stub


async def test_downstream_invalid_argument_is_not_internal(fake_gateway):
    stub = await gateway(fake_gateway, pg_fail=grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(gateway_pb2.SearchRequest(query="测试"), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(err.value) == [("query", "is wrong")]
    assert err.value.details().startswith("retriever_pg: ")


async def test_expander_invalid_argument_reaches_answer_callers_too(fake_gateway):
    stub = await gateway(fake_gateway, expander_fail=grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Answer(gateway_pb2.AnswerRequest(query="测试"), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(err.value)[0][0] == "query"


async def test_no_retriever_answering_is_unavailable_not_internal(fake_gateway):
    stub = await gateway(fake_gateway, pg_fail=grpc.StatusCode.UNAVAILABLE, graph_fail=grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Search(gateway_pb2.SearchRequest(query="测试"), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_stream_bad_input_is_invalid_argument_through_the_interceptor(fake_gateway):
    stub = await gateway(fake_gateway)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query=" "), timeout=10):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(err.value)[0][0] == "query"


async def test_stream_downstream_invalid_argument_passes_through(fake_gateway):
    stub = await gateway(fake_gateway, expander_fail=grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query="测试"), timeout=10):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_healthy_stream_ends_with_the_answer(fake_gateway):
    stub = await gateway(fake_gateway)
    events = [e async for e in stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query="测试"), timeout=10)]
    assert events[-1].HasField("done") and events[-1].done.citations[0].document_id == "1"
    assert any(e.HasField("stage") and e.stage.stage == "strategy.standard" for e in events)
