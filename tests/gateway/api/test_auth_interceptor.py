"""AuthInterceptor on a real grpc.aio server (port 0, loopback) serving the
standard health service, reflection and a trivial echo service: no key, a
wrong key, a good key, the rate limit with retry-after, health and
reflection exempt, and no key in the logs."""
from __future__ import annotations

import logging

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from services.cli.keys import create_key
from services.gateway.api.auth import AuthInterceptor, Gate, KeyStore, TokenBucketLimiter, parse_line

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]
ECHO, STREAM = "/test.Echo/Echo", "/test.Echo/Chunks"


class Clock:
    """A limiter clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _echo(request: bytes, context) -> bytes:
    return b"echo:" + request


async def _chunks(request: bytes, context):
    for piece in (b"a", b"b"):
        yield piece


@pytest_asyncio.fixture(loop_scope="session")
async def server():
    alice, alice_line = create_key("alice")
    bob, bob_line = create_key("bob")
    clock = Clock()
    gate = Gate(KeyStore([parse_line(alice_line), parse_line(bob_line)]), TokenBucketLimiter(rate=1.0, burst=2, clock=clock))
    srv = grpc.aio.server(interceptors=[AuthInterceptor(gate)])
    srv.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Echo", {
        "Echo": grpc.unary_unary_rpc_method_handler(_echo),
        "Chunks": grpc.unary_stream_rpc_method_handler(_chunks),
    })])
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, srv)
    reflection.enable_server_reflection(["test.Echo", health.SERVICE_NAME, reflection.SERVICE_NAME], srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    await srv.start()
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield {"channel": channel, "alice": alice, "bob": bob, "clock": clock}
    finally:
        await channel.close()
        await srv.stop(0)


async def echo(server, metadata=()):
    return await server["channel"].unary_unary(ECHO)(b"hi", metadata=metadata, timeout=10)


async def test_no_key_is_unauthenticated_for_unary_and_streaming_calls(server):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await echo(server)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and "API key" in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in server["channel"].unary_stream(STREAM)(b"", timeout=10):
            pass
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_wrong_keys_are_unauthenticated(server):
    alice = server["alice"]
    for bad in (alice[:-1] + ("A" if alice[-1] != "A" else "B"), "gmk_00000000_" + "x" * 43, "not-a-key"):
        for metadata in ((("authorization", f"Bearer {bad}"),), (("x-api-key", bad),)):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await echo(server, metadata)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_good_key_passes_by_bearer_or_x_api_key_and_streams_too(server):
    server["clock"].now += 100  # full buckets
    assert await echo(server, (("authorization", f"Bearer {server['alice']}"),)) == b"echo:hi"
    assert await echo(server, (("x-api-key", server["alice"]),)) == b"echo:hi"
    chunks = [c async for c in server["channel"].unary_stream(STREAM)(b"", metadata=(("x-api-key", server["bob"]),), timeout=10)]
    assert chunks == [b"a", b"b"]


async def test_rate_limit_answers_resource_exhausted_with_retry_after_per_key(server):
    server["clock"].now += 100
    alice = (("authorization", f"Bearer {server['alice']}"),)
    assert await echo(server, alice) == b"echo:hi"
    assert await echo(server, alice) == b"echo:hi"  # burst of 2
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await echo(server, alice)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(err.value.trailing_metadata())["retry-after"] == "1"
    assert "alice" in err.value.details()
    assert await echo(server, (("x-api-key", server["bob"]),)) == b"echo:hi"  # bob's own bucket
    server["clock"].now += 1.0
    assert await echo(server, alice) == b"echo:hi"


async def test_health_and_reflection_need_no_key(server):
    reply = await health_pb2_grpc.HealthStub(server["channel"]).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(server["channel"])
    replies = [r async for r in stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)]
    assert "test.Echo" in {s.name for s in replies[0].list_services_response.service}


async def test_keys_never_appear_in_the_logs(server, caplog):
    alice = server["alice"]
    wrong = alice[:-1] + ("A" if alice[-1] != "A" else "B")
    server["clock"].now += 100
    with caplog.at_level(logging.DEBUG):
        for metadata in ((), (("authorization", f"Bearer {wrong}"),), (("x-api-key", alice),), (("x-api-key", alice),), (("x-api-key", alice),)):
            try:
                await echo(server, metadata)
            except grpc.aio.AioRpcError:
                pass
    assert "refused: UNAUTHENTICATED" in caplog.text and "refused: RESOURCE_EXHAUSTED (key alice)" in caplog.text
    for secret in (alice, wrong, alice.split("_", 2)[2], wrong.split("_", 2)[2]):
        assert secret not in caplog.text


async def test_a_refusal_is_logged_with_the_callers_address(server, caplog):
    """An operator reading the log after a burst of 401s needs to know who
    sent them: the refusal names the method, the code and the peer."""
    with caplog.at_level(logging.INFO, logger="graphmesh.gateway.auth"):
        with pytest.raises(grpc.aio.AioRpcError):
            await echo(server, ())
    line = next(r.getMessage() for r in caplog.records if "refused" in r.getMessage())
    assert "/test.Echo/" in line and "refused: UNAUTHENTICATED (key none/invalid) from ipv" in line
