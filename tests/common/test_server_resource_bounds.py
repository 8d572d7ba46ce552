"""Resource bounds of every service's gRPC server (services.common.server):
RPCs in flight per service (RESOURCE_EXHAUSTED beyond, at once), streams per
client connection (further calls wait for a slot), message size
(RESOURCE_EXHAUSTED); and the gateway's own bounds on query length and top_k
(INVALID_ARGUMENT naming the field)."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from services.common.server import Service, create_server
from services.common.settings import ServiceSettings

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


class Gate(reranker_pb2_grpc.RerankerServiceServicer):
    """Holds every call until released; records the most calls in flight."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.inflight = self.most = 0
        self.arrived = asyncio.Event()

    async def Rerank(self, request, context):
        self.inflight += 1
        self.most = max(self.most, self.inflight)
        self.arrived.set()
        try:
            await self.release.wait()
        finally:
            self.inflight -= 1
        return reranker_pb2.RerankResponse()


async def serve(gate: Gate, **limits):
    service = Service(name="reranker", full_names=["graphmesh.reranker.v1.RerankerService"],
                      register=lambda s: reranker_pb2_grpc.add_RerankerServiceServicer_to_server(gate, s),
                      max_message_bytes=1024 * 1024)
    server, port, _ = await create_server(service, **limits)
    return server, f"127.0.0.1:{port}"


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")  # the module's asyncio mark; this one is sync
def test_defaults_bound_every_service():
    s = ServiceSettings()
    assert s.max_concurrent_rpcs == 256 and s.max_concurrent_streams == 100


async def test_calls_beyond_the_in_flight_limit_are_resource_exhausted_at_once():
    gate = Gate()
    server, address = await serve(gate, max_concurrent_rpcs=2)
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            stub = reranker_pb2_grpc.RerankerServiceStub(ch)
            held = [asyncio.ensure_future(stub.Rerank(reranker_pb2.RerankRequest(query="q"), timeout=30)) for _ in range(2)]
            while gate.inflight < 2:
                await asyncio.sleep(0.01)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Rerank(reranker_pb2.RerankRequest(query="q"), timeout=30)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            gate.release.set()
            await asyncio.gather(*held)
            await stub.Rerank(reranker_pb2.RerankRequest(query="q"), timeout=30)  # room again
    finally:
        await server.stop(0)
    assert gate.most == 2


async def test_streams_per_connection_are_bounded_and_further_calls_wait():
    gate = Gate()
    server, address = await serve(gate, max_concurrent_streams=1)
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            stub = reranker_pb2_grpc.RerankerServiceStub(ch)
            calls = [asyncio.ensure_future(stub.Rerank(reranker_pb2.RerankRequest(query="q"), timeout=30)) for _ in range(3)]
            await gate.arrived.wait()
            for _ in range(20):
                await asyncio.sleep(0.01)  # give the others every chance to arrive
            assert gate.inflight == 1
            gate.release.set()
            await asyncio.gather(*calls)  # they waited, none failed
    finally:
        await server.stop(0)
    assert gate.most == 1


async def test_oversized_messages_are_resource_exhausted():
    gate = Gate()
    gate.release.set()
    server, address = await serve(gate)
    try:
        async with grpc.aio.insecure_channel(address, options=[("grpc.max_send_message_length", 8 * 2**20)]) as ch:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await reranker_pb2_grpc.RerankerServiceStub(ch).Rerank(reranker_pb2.RerankRequest(query="q" * (2 * 2**20)), timeout=30)
    finally:
        await server.stop(0)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize("request_, field", [
    (gateway_pb2.SearchRequest(query="问" * (ServiceSettings().max_query_chars + 1)), "query"),
    (gateway_pb2.SearchRequest(query="问", top_k=101), "top_k"),
    (gateway_pb2.SearchRequest(query="问", top_k=-1), "top_k"),
])
async def test_gateway_bounds_name_the_field(fake_gateway, request_, field):
    from services.common.errors import field_violations

    gw = await fake_gateway()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await gw.stub.Search(request_, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(err.value)] == [field]


async def test_errors_quoting_a_huge_value_stay_small_and_keep_their_code(fake_gateway):
    # Regression (fuzzing, issue 16): the INVALID_ARGUMENT message quoted a
    # 1 MB disabled stage whole, overflowed gRPC's 16 KiB metadata limit and
    # reached the caller as RESOURCE_EXHAUSTED (with a GOAWAY for the
    # connection).
    from services.common.errors import field_violations

    gw = await fake_gateway()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await gw.stub.Search(gateway_pb2.SearchRequest(query="工资", disabled_stages=["x" * 1_000_000]), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(err.value.details()) <= 500
    assert [f for f, _ in field_violations(err.value)] == ["disabled_stages"]
    reply = await gw.stub.Search(gateway_pb2.SearchRequest(query="工资"), timeout=10)  # the connection still works
    assert reply.results
