"""Retries of idempotent RPCs through the gRPC service config of
services.common.clients.channel, against real grpc.aio servers on loopback:
UNAVAILABLE is retried (bounded); other codes and non-idempotent RPCs are not."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.clients import RETRY_POLICY, channel

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


class Flaky(retriever_pb2_grpc.RetrieverServiceServicer):
    """Answers ``codes`` in turn (one per call), then OK."""

    def __init__(self, codes) -> None:
        self.codes = list(codes)
        self.calls = 0

    async def Retrieve(self, request, context):
        self.calls += 1
        if self.codes:
            await context.abort(self.codes.pop(0), "flaky")
        return retriever_pb2.RetrieveResponse()


class FlakyExpander(expander_pb2_grpc.ExpanderServiceServicer):
    def __init__(self) -> None:
        self.calls = 0

    async def Rewrite(self, request, context):
        self.calls += 1
        await context.abort(grpc.StatusCode.UNAVAILABLE, "flaky")


async def start(servicer, add) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    add(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def test_unavailable_is_retried_and_the_call_succeeds():
    flaky = Flaky([grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE])
    server, address = await start(flaky, retriever_pb2_grpc.add_RetrieverServiceServicer_to_server)
    try:
        async with channel(address) as ch:
            await retriever_pb2_grpc.RetrieverServiceStub(ch).Retrieve(retriever_pb2.RetrieveRequest(query="q"), timeout=10)
    finally:
        await server.stop(0)
    assert flaky.calls == 3


async def test_attempts_are_bounded():
    flaky = Flaky([grpc.StatusCode.UNAVAILABLE] * 10)
    server, address = await start(flaky, retriever_pb2_grpc.add_RetrieverServiceServicer_to_server)
    try:
        async with channel(address) as ch:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await retriever_pb2_grpc.RetrieverServiceStub(ch).Retrieve(retriever_pb2.RetrieveRequest(query="q"), timeout=10)
    finally:
        await server.stop(0)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE and flaky.calls == RETRY_POLICY["maxAttempts"]


async def test_other_codes_are_not_retried():
    flaky = Flaky([grpc.StatusCode.INTERNAL])
    server, address = await start(flaky, retriever_pb2_grpc.add_RetrieverServiceServicer_to_server)
    try:
        async with channel(address) as ch:
            with pytest.raises(grpc.aio.AioRpcError):
                await retriever_pb2_grpc.RetrieverServiceStub(ch).Retrieve(retriever_pb2.RetrieveRequest(query="q"), timeout=10)
    finally:
        await server.stop(0)
    assert flaky.calls == 1


async def test_non_idempotent_rewrite_is_not_retried():
    flaky = FlakyExpander()
    server, address = await start(flaky, expander_pb2_grpc.add_ExpanderServiceServicer_to_server)
    try:
        async with channel(address) as ch:
            with pytest.raises(grpc.aio.AioRpcError):
                await expander_pb2_grpc.ExpanderServiceStub(ch).Rewrite(expander_pb2.RewriteRequest(query="q"), timeout=10)
    finally:
        await server.stop(0)
    assert flaky.calls == 1
