"""What the gateway does at its edge, over gRPC and REST: API keys and rate
limits, CORS, request size limits, the OpenAPI document and trace ids. The
real gateway (servicer, interceptors, REST transcoder) on port 0, the
downstream services faked."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import grpc
import pytest
from aiohttp import ClientSession
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.api.auth import new_key

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]
OPENAPI = Path(__file__).resolve().parents[3] / "services" / "gateway" / "static" / "openapi.json"
SEARCH = gateway_pb2.SearchRequest(query="测试", top_k=3)


@pytest.fixture(scope="module")
def keys() -> dict[str, str]:
    """Two fresh keys (name -> key) and their stored lines ("lines")."""
    alice, alice_record = new_key("alice")
    bob, bob_record = new_key("bob")
    return {"alice": alice, "bob": bob, "lines": f"{alice_record.line()},{bob_record.line()}"}


async def rest(url: str, path: str, body: object, headers: dict | None = None) -> tuple[int, dict, dict]:
    async with ClientSession() as session:
        async with session.post(url + path, data=json.dumps(body, ensure_ascii=False),
                                headers={"Content-Type": "application/json", **(headers or {})}) as reply:
            return reply.status, dict(reply.headers), await reply.json(content_type=None)


async def test_grpc_without_a_key_or_with_a_wrong_one_is_unauthenticated(fake_gateway, keys):
    gw = await fake_gateway(auth={"enabled": True, "api_keys": keys["lines"]})
    for metadata in ((), (("authorization", "Bearer gmk_00000000_" + "x" * 43),), (("x-api-key", keys["alice"] + "x"),)):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await gw.stub.Search(SEARCH, metadata=metadata, timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    ok = await gw.stub.Search(SEARCH, metadata=(("authorization", f"Bearer {keys['alice']}"),), timeout=10)
    assert ok.results
    ok = await gw.stub.Search(SEARCH, metadata=(("x-api-key", keys["bob"]),), timeout=10)
    assert ok.results


async def test_health_stays_open_with_auth_on(fake_gateway, keys):
    gw = await fake_gateway(auth={"enabled": True, "api_keys": keys["lines"]})
    async with grpc.aio.insecure_channel(gw.address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_rate_limit_is_resource_exhausted_with_retry_after_per_key(fake_gateway, keys):
    gw = await fake_gateway(auth={"enabled": True, "api_keys": keys["lines"]},
                            rate_limit={"per_second": 0.01, "burst": 2})
    alice = (("authorization", f"Bearer {keys['alice']}"),)
    for _ in range(2):
        await gw.stub.Search(SEARCH, metadata=alice, timeout=10)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await gw.stub.Search(SEARCH, metadata=alice, timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    retry = dict(err.value.trailing_metadata())["retry-after"]
    assert int(retry) >= 1
    # Another key has its own bucket.
    assert (await gw.stub.Search(SEARCH, metadata=(("x-api-key", keys["bob"]),), timeout=10)).results


async def test_rest_auth_401_good_key_and_429_with_retry_after(fake_gateway, keys):
    gw = await fake_gateway(auth={"enabled": True, "api_keys": keys["lines"]},
                            rate_limit={"per_second": 0.01, "burst": 1})
    status, _, body = await rest(gw.rest_url, "/v1/query:search", {"query": "测试"})
    assert status == 401 and body["error"]["status"] == "UNAUTHENTICATED"
    status, _, body = await rest(gw.rest_url, "/v1/query:search", {"query": "测试"}, {"Authorization": f"Bearer {keys['alice']}"})
    assert status == 200 and body["results"]
    status, headers, body = await rest(gw.rest_url, "/v1/query:search", {"query": "测试"}, {"X-API-Key": keys["alice"]})
    assert status == 429 and body["error"]["status"] == "RESOURCE_EXHAUSTED" and int(headers["Retry-After"]) >= 1


async def test_streaming_rpc_without_a_key_is_unauthenticated_not_internal(fake_gateway, keys):
    gw = await fake_gateway(auth={"enabled": True, "api_keys": keys["lines"]})
    stream = gw.stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query="测试"), timeout=10)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in stream:
            pass
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    status, _, body = await rest(gw.rest_url, "/v1/query:answerStream", {"query": "测试"}, {"Accept": "text/event-stream"})
    assert status == 401 and body["error"]["status"] == "UNAUTHENTICATED"
    good = (("authorization", f"Bearer {keys['alice']}"),)
    events = [e async for e in gw.stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query="测试"), metadata=good, timeout=10)]
    assert events[-1].WhichOneof("event") == "done"


async def test_keys_never_reach_the_logs(fake_gateway, keys, caplog):
    gw = await fake_gateway(auth={"enabled": True, "api_keys": keys["lines"]})
    with caplog.at_level(logging.DEBUG):
        await gw.stub.Search(SEARCH, metadata=(("x-api-key", keys["alice"]),), timeout=10)
        with pytest.raises(grpc.aio.AioRpcError):
            await gw.stub.Search(SEARCH, metadata=(("x-api-key", keys["alice"] + "x"),), timeout=10)
        await rest(gw.rest_url, "/v1/query:search", {"query": "测试"}, {"Authorization": f"Bearer {keys['bob']}"})
    # gmk_<id>_<secret>: the secret is URL-safe base64 and may hold "_" itself.
    secrets = [keys["alice"].split("_", 2)[2], keys["bob"].split("_", 2)[2]]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "refused" in logged  # the wrong key was logged as a refusal...
    assert not any(secret in logged for secret in secrets)  # ...without any key


async def test_cors_allow_list(fake_gateway):
    gw = await fake_gateway(rest={"cors_origins": ["https://console.example"]})
    async with ClientSession() as session:
        preflight = {"Origin": "https://console.example", "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "Authorization, Content-Type"}
        async with session.options(gw.rest_url + "/v1/query:search", headers=preflight) as reply:
            assert reply.status == 204
            assert reply.headers["Access-Control-Allow-Origin"] == "https://console.example"
            assert "Authorization" in reply.headers["Access-Control-Allow-Headers"]
        async with session.options(gw.rest_url + "/v1/query:search", headers={**preflight, "Origin": "https://evil.example"}) as reply:
            assert reply.status == 403 and "Access-Control-Allow-Origin" not in reply.headers
        async with session.post(gw.rest_url + "/v1/query:search", json={"query": "测试"}, headers={"Origin": "https://console.example"}) as reply:
            assert reply.status == 200 and reply.headers["Access-Control-Allow-Origin"] == "https://console.example"
        async with session.post(gw.rest_url + "/v1/query:search", json={"query": "测试"}, headers={"Origin": "https://evil.example"}) as reply:
            assert "Access-Control-Allow-Origin" not in reply.headers


async def test_the_preflight_and_the_request_it_guards_agree_on_origins_and_allow_the_headers_asked(fake_gateway):
    """A trial: with http://localhost:3000 allowed, a preflight from http://LOCALHOST:3000/ was 403 while the
    POST itself went through; and a page's OpenTelemetry `traceparent` header was refused by a fixed list."""
    gw = await fake_gateway(rest={"cors_origins": ["http://localhost:3000"]})
    async with ClientSession() as session:
        for origin in ("http://localhost:3000", "http://LOCALHOST:3000", "http://localhost:3000/"):
            preflight = {"Origin": origin, "Access-Control-Request-Method": "POST",
                         "Access-Control-Request-Headers": "content-type, traceparent"}
            async with session.options(gw.rest_url + "/v1/query:search", headers=preflight) as reply:
                assert reply.status == 204 and reply.headers["Access-Control-Allow-Origin"] == origin
                allowed = [h.strip().lower() for h in reply.headers["Access-Control-Allow-Headers"].split(",")]
                assert "traceparent" in allowed and "authorization" in allowed
            async with session.post(gw.rest_url + "/v1/query:search", json={"query": "测试"}, headers={"Origin": origin}) as reply:
                assert reply.status == 200 and reply.headers["Access-Control-Allow-Origin"] == origin
        other = {"Origin": "http://localhost:3001", "Access-Control-Request-Method": "POST"}
        async with session.options(gw.rest_url + "/v1/query:search", headers=other) as reply:
            assert reply.status == 403
        async with session.post(gw.rest_url + "/v1/query:search", json={"query": "测试"}, headers={"Origin": other["Origin"]}) as reply:
            assert reply.status == 403


async def test_an_allowed_page_can_read_streams_and_edge_refusals_and_use_every_method(fake_gateway):
    page = "https://console.example"
    gw = await fake_gateway(rest={"cors_origins": [page]})
    async with ClientSession() as session:
        stream = {"Origin": page, "Accept": "text/event-stream"}
        async with session.post(gw.rest_url + "/v1/query:answerStream", json={"query": "测试"}, headers=stream) as reply:
            assert reply.status == 200 and reply.headers["Access-Control-Allow-Origin"] == page  # headers sent before the body
            assert "\"done\"" in await reply.text()
        async with session.post(gw.rest_url + "/v1/query:search", data="query=测试",
                                headers={"Origin": page, "Content-Type": "text/plain"}) as reply:
            assert reply.status == 415 and reply.headers["Access-Control-Allow-Origin"] == page
        async with session.post(gw.rest_url + "/v1/query:search", json={"query": "测试"},
                                headers={"Origin": page, "Host": "rebound.example"}) as reply:
            assert reply.status == 403 and "Access-Control-Allow-Origin" not in reply.headers  # DNS rebinding
        preflight = {"Origin": page, "Access-Control-Request-Method": "DELETE"}
        async with session.options(gw.rest_url + "/v1/collections/hr", headers=preflight) as reply:
            methods = {m.strip() for m in reply.headers["Access-Control-Allow-Methods"].split(",")}
            assert reply.status == 204 and {"DELETE", "PATCH", "POST", "GET"} <= methods


async def test_request_size_limits_over_rest_and_grpc(fake_gateway):
    gw = await fake_gateway(max_request_bytes=4096)
    status, _, body = await rest(gw.rest_url, "/v1/documents:ingest", {"jsonl": "A" * 8192})
    assert status == 413 and body["error"]["status"] == "RESOURCE_EXHAUSTED" and "4096" in body["error"]["message"]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await gw.stub.Ingest(gateway_pb2.IngestRequest(jsonl=b"x" * 8192), timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_openapi_document_is_served(fake_gateway):
    gw = await fake_gateway()
    async with ClientSession() as session:
        async with session.get(gw.rest_url + "/openapi.json") as reply:
            assert reply.status == 200 and reply.content_type == "application/json"
            served = await reply.json()
    assert served == json.loads(OPENAPI.read_text(encoding="utf-8"))
    assert "/v1/query:search" in served["paths"]


async def test_trace_id_in_grpc_metadata_and_rest_header(fake_gateway):
    gw = await fake_gateway()
    call = gw.stub.Search(SEARCH, timeout=10)
    await call
    trace_id = dict(await call.initial_metadata())["x-trace-id"]
    assert len(trace_id) == 32 and int(trace_id, 16)
    again = gw.stub.Search(SEARCH, timeout=10)
    await again
    assert dict(await again.initial_metadata())["x-trace-id"] != trace_id  # one id per request
    status, headers, _ = await rest(gw.rest_url, "/v1/query:search", {"query": "测试"})
    assert status == 200 and len(headers["X-Trace-Id"]) == 32


async def test_a_body_without_a_key_is_refused_before_it_is_read(fake_gateway, keys, caplog):
    """A trial's 57 MB bodies without a key were read and parsed before the 401, slowing keyed users: a
    malformed body without a key is now 401 (the key is checked first), not 400 (it was parsed first).
    The refusal is logged with the caller's address, as the gRPC interceptor's are."""
    from aiohttp import ClientSession

    gw = await fake_gateway(auth={"enabled": True, "api_keys": keys["lines"]})
    async with ClientSession() as session:
        with caplog.at_level(logging.INFO, logger="graphmesh.gateway.rest"):
            async with session.post(gw.rest_url + "/v1/query:search", data=b"{not json",
                                    headers={"Content-Type": "application/json"}) as reply:
                assert reply.status == 401 and (await reply.json())["error"]["status"] == "UNAUTHENTICATED"
        assert "POST /v1/query:search refused: UNAUTHENTICATED (key none/invalid) from 127.0.0.1" in caplog.text
        async with session.post(gw.rest_url + "/v1/query:search", data=b"{not json",
                                headers={"Content-Type": "application/json", "X-API-Key": keys["alice"]}) as reply:
            assert reply.status == 400  # with a key, the body is read and its fault named
