"""The gateway's own HTTP routes beside the RPCs: the web console's files
(GET /, GET /console/{name}) and GET /v1/stages:summary, on the real gateway
(servicer, interceptors, REST) over fake downstream clients."""
from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import ClientSession

from services.gateway.api.auth import new_key
from services.gateway.api.console import CONSOLE

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def get(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    async with ClientSession() as session:
        async with session.get(url, headers=headers or {}) as reply:
            return reply.status, dict(reply.headers), await reply.read()


async def test_console_page_and_assets_are_served_with_their_types(fake_gateway):
    gw = await fake_gateway()
    status, headers, body = await get(gw.rest_url + "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert body == (CONSOLE / "index.html").read_bytes()
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    status, headers, body = await get(gw.rest_url + "/console/app.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert body == (CONSOLE / "app.js").read_bytes()
    status, headers, _ = await get(gw.rest_url + "/console/app.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css")


async def test_every_module_the_page_imports_exists():
    # The console has no build step: each relative import must name a file in the folder.
    import re

    for script in CONSOLE.glob("*.js"):
        for name in re.findall(r'from "\./([\w.-]+)"', script.read_text(encoding="utf-8")):
            assert (CONSOLE / name).is_file(), f"{script.name} imports missing {name}"


@pytest.mark.parametrize("path", ["/console/../rest.py", "/console/%2e%2e/rest.py", "/console/missing.js", "/console/openapi.json"])
async def test_nothing_outside_the_console_files_is_served(fake_gateway, path):
    gw = await fake_gateway()
    status, _, body = await get(gw.rest_url + path)
    assert status == 404, body
    assert json.loads(body)["error"]["status"] == "NOT_FOUND"


async def test_stage_summary_counts_the_requests_made_since_start(fake_gateway):
    gw = await fake_gateway()
    async with ClientSession() as session:
        async with session.post(gw.rest_url + "/v1/query:search", json={"query": "测试", "topK": 3}) as reply:
            assert reply.status == 200
        async with session.post(gw.rest_url + "/v1/query:search", json={"query": " "}) as reply:
            assert reply.status == 400  # the caller's mistake: counted, not an error of the service
    # grpc sends an aborted call's status before the abort returns to the metrics
    # interceptor, so the count can land a moment after the caller saw the 400
    for _ in range(50):
        status, headers, body = await get(gw.rest_url + "/v1/stages:summary")
        summary = json.loads(body)
        search = next((r for r in summary["recent"]["rpcs"] if r["side"] == "server" and r["method"] == "Search"), None)
        if search and sum(search["codes"].values()) >= 2:
            break
        await asyncio.sleep(0.02)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    recent = summary["recent"]  # since the snapshot taken when the REST app started
    assert recent is not None and recent["windowSeconds"] >= 0
    stages = {row["stage"]: row for row in recent["stages"]}
    assert stages["total"]["count"] == 1 and stages["total"]["p50Ms"] is not None
    assert stages["retrieve.pg"]["degraded"] == 0
    search = next(r for r in recent["rpcs"] if r["side"] == "server" and r["method"] == "Search")
    assert search["codes"] == {"INVALID_ARGUMENT": 1, "OK": 1} and search["errors"] == 0
    assert any(r["stage"] == "total" for r in summary["sinceStart"]["stages"])


async def test_stage_summary_needs_a_key_when_auth_is_on(fake_gateway):
    key, record = new_key("console")
    gw = await fake_gateway(auth={"enabled": True, "api_keys": record.line()})
    status, _, body = await get(gw.rest_url + "/v1/stages:summary")
    assert status == 401 and json.loads(body)["error"]["status"] == "UNAUTHENTICATED"
    status, _, _ = await get(gw.rest_url + "/v1/stages:summary", {"Authorization": f"Bearer {key}"})
    assert status == 200
    status, _, _ = await get(gw.rest_url + "/")  # the page itself holds no data: open
    assert status == 200


async def test_healthz_answers_the_gateways_grpc_health_without_an_api_key(fake_gateway):
    """A trial's HTTP load balancer had no route to probe: /healthz, /health and /readyz were all 404."""
    key, record = new_key("probe")
    gw = await fake_gateway(auth={"enabled": True, "api_keys": record.line()})
    status, headers, body = await get(gw.rest_url + "/healthz")  # no key: a probe carries none
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(body) == {"status": "SERVING"}


async def test_healthz_is_503_when_the_gateways_grpc_server_does_not_answer():
    import grpc
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    from services.gateway.api.console import add_console_routes

    app = web.Application()
    nowhere = grpc.aio.insecure_channel("127.0.0.1:1")
    add_console_routes(app, grpc_channel=lambda: nowhere)
    async with TestClient(TestServer(app)) as client:
        reply = await client.get("/healthz")
        assert reply.status == 503 and (await reply.json())["status"] == "UNREACHABLE"
    await nowhere.close()
