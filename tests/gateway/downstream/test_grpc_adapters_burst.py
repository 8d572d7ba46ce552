"""The gateway's channel to a downstream service under a burst: 300 calls at
once through the gRPC adapter to a real fuser server (which allows 100
streams per connection) all succeed; none is reset."""
from __future__ import annotations

import asyncio

import pytest

from graphmesh.fuser.v1 import fuser_pb2
from services.common.server import create_server
from services.fuser.server import build
from services.gateway.downstream.grpc_adapters import GrpcFuser

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def test_300_concurrent_calls_on_one_channel_all_succeed():
    service, _ = await build()
    server, port, _ = await create_server(service, max_concurrent_streams=100)
    fuser = GrpcFuser(f"127.0.0.1:{port}")
    try:
        replies = await asyncio.gather(*(fuser.fuse(fuser_pb2.FuseRequest(query=f"q{i}"), timeout=60) for i in range(300)),
                                       return_exceptions=True)
    finally:
        await fuser.close()
        await server.stop(0)
    errors = [r for r in replies if isinstance(r, Exception)]
    assert not errors, errors[:3]
