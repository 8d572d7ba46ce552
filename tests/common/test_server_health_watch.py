"""Server-streaming RPCs through the mesh's interceptors
(services/common/server.py, stream_handlers.py, metrics.py): grpc.health.v1
Watch, whose servicer sends with ``await context.write`` (a coroutine, not an
async generator; it answered INTERNAL on all seven services), and the status
a cancelled stream is counted with."""
from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graphmesh.reranker.v1 import reranker_pb2_grpc
from services.common.server import Service, create_server

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def test_health_watch_streams_the_status_and_its_changes():
    service = Service(name="reranker", full_names=["graphmesh.reranker.v1.RerankerService"],
                      register=lambda s: reranker_pb2_grpc.add_RerankerServiceServicer_to_server(
                          reranker_pb2_grpc.RerankerServiceServicer(), s), max_message_bytes=1 << 20)
    server, port, health = await create_server(service, mesh_token="secret")  # health needs no token
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
            first = await asyncio.wait_for(call.read(), 5)
            assert first.status == health_pb2.HealthCheckResponse.SERVING
            await health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
            second = await asyncio.wait_for(call.read(), 5)
            assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
            call.cancel()
    finally:
        await server.stop(0)


class _Context:
    def __init__(self, code=None, left=None) -> None:
        self._code, self._left = code, left

    def code(self):
        return self._code

    def time_remaining(self):
        return self._left


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")  # the module's asyncio mark; this one is sync
def test_a_cancelled_call_is_counted_cancelled_or_deadline_exceeded_not_unknown():
    from services.common.metrics import failure_code
    cancelled = asyncio.CancelledError()
    assert failure_code(cancelled, _Context(left=12.0)) == grpc.StatusCode.CANCELLED  # the client went away
    assert failure_code(cancelled, _Context(left=None)) == grpc.StatusCode.CANCELLED
    assert failure_code(cancelled, _Context(left=-0.002)) == grpc.StatusCode.DEADLINE_EXCEEDED
    assert failure_code(GeneratorExit(), _Context(left=5.0)) == grpc.StatusCode.CANCELLED  # closed between two messages
    assert failure_code(RuntimeError("bug"), _Context()) == grpc.StatusCode.UNKNOWN
    assert failure_code(RuntimeError("x"), _Context(code=grpc.StatusCode.INVALID_ARGUMENT)) == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_stream_the_client_cancels_is_counted_cancelled():
    from services.common.metrics import SERVER_HANDLED
    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    class Streaming(gateway_pb2_grpc.GatewayServiceServicer):
        async def AnswerStream(self, request, context):
            yield gateway_pb2.AnswerStreamResponse(token="一")
            await asyncio.sleep(30)

    service = Service(name="gateway", full_names=["graphmesh.gateway.v1.GatewayService"],
                      register=lambda s: gateway_pb2_grpc.add_GatewayServiceServicer_to_server(Streaming(), s),
                      max_message_bytes=1 << 20, public=True)
    labels = ("server_stream", "graphmesh.gateway.v1.GatewayService", "AnswerStream")
    before = {code: SERVER_HANDLED.labels(*labels, code)._value.get() for code in ("CANCELLED", "UNKNOWN")}
    server, port, _ = await create_server(service)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = gateway_pb2_grpc.GatewayServiceStub(channel).AnswerStream(gateway_pb2.AnswerStreamRequest(query="年假"))
            assert (await call.read()).token == "一"
            call.cancel()
        for _ in range(100):
            if SERVER_HANDLED.labels(*labels, "CANCELLED")._value.get() > before["CANCELLED"]:
                break
            await asyncio.sleep(0.02)
        assert SERVER_HANDLED.labels(*labels, "CANCELLED")._value.get() == before["CANCELLED"] + 1
        assert SERVER_HANDLED.labels(*labels, "UNKNOWN")._value.get() == before["UNKNOWN"]
    finally:
        await server.stop(0)


async def test_health_watch_works_under_the_tracing_instrumentation_too():
    from services.common.tracing import server_instrumentor
    instrumentor = server_instrumentor()
    instrumentor.instrument()  # as setup_tracing does in every service process
    try:
        service = Service(name="reranker", full_names=["graphmesh.reranker.v1.RerankerService"],
                          register=lambda s: reranker_pb2_grpc.add_RerankerServiceServicer_to_server(
                              reranker_pb2_grpc.RerankerServiceServicer(), s), max_message_bytes=1 << 20)
        server, port, _ = await create_server(service)
    finally:
        instrumentor.uninstrument()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
            assert (await asyncio.wait_for(call.read(), 5)).status == health_pb2.HealthCheckResponse.SERVING
            call.cancel()
    finally:
        await server.stop(0)
