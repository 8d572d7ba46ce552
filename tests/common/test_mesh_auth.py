"""Calls between services carry the mesh token: a real fuser gRPC server with
a token refuses callers without it (UNAUTHENTICATED, streaming or not),
keeps health and reflection open, and serves a channel made by
services.common.clients.channel, which sends the configured token."""
from __future__ import annotations

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graphmesh.fuser.v1 import fuser_pb2, fuser_pb2_grpc
from services.common.clients import channel
from services.common.errors import ConfigError
from services.common.mesh_auth import MESH_TOKEN_METADATA, MeshSettings, new_mesh_token
from services.common.redaction import redact
from services.common.server import create_server
from services.fuser.server import build

pytestmark = pytest.mark.contract

ASYNC = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(loop_scope="session")
async def fuser_with_token():
    token = new_mesh_token()
    service, _ = await build()
    server, port, _ = await create_server(service, mesh_token=token)
    yield f"127.0.0.1:{port}", token
    await server.stop(0)


@ASYNC
async def test_a_call_without_the_token_or_with_a_wrong_one_is_unauthenticated(fuser_with_token):
    address, token = fuser_with_token
    async with grpc.aio.insecure_channel(address) as ch:
        stub = fuser_pb2_grpc.FuserServiceStub(ch)
        for metadata in ((), ((MESH_TOKEN_METADATA, token[:-1] + "x"),)):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Fuse(fuser_pb2.FuseRequest(query="q"), metadata=metadata, timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        reply = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


@ASYNC
async def test_the_mesh_channel_sends_the_configured_token(fuser_with_token, monkeypatch):
    address, token = fuser_with_token
    async with channel(address, mesh_token="") as ch:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await fuser_pb2_grpc.FuserServiceStub(ch).Fuse(fuser_pb2.FuseRequest(query="q"), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    monkeypatch.setenv("GRAPHMESH_MESH_TOKEN", token)
    async with channel(address) as ch:
        reply = await fuser_pb2_grpc.FuserServiceStub(ch).Fuse(fuser_pb2.FuseRequest(query="q"), timeout=10)
    assert isinstance(reply, fuser_pb2.FuseResponse)


@ASYNC
async def test_a_server_without_a_token_serves_everyone():
    service, _ = await build()
    server, port, _ = await create_server(service)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            reply = await fuser_pb2_grpc.FuserServiceStub(ch).Fuse(fuser_pb2.FuseRequest(query="q"), timeout=10)
        assert isinstance(reply, fuser_pb2.FuseResponse)
    finally:
        await server.stop(0)


def test_token_settings_read_a_file_refuse_short_tokens_and_never_reach_a_log(tmp_path):
    token = new_mesh_token()
    (tmp_path / "token").write_text(token + "\n")
    assert MeshSettings(token_file=str(tmp_path / "token")).resolved_token() == token
    with pytest.raises(ConfigError):
        MeshSettings(token="short").resolved_token()
    with pytest.raises(ConfigError):
        MeshSettings(token_file=str(tmp_path / "missing")).resolved_token()
    assert token not in redact(f"metadata {MESH_TOKEN_METADATA}: {token}")
