"""The REST edge as an attacker meets it (issue: secure by default at the
edge): cross-site writes, DNS rebinding, a burst of concurrent requests,
hostile JSON, hostile console paths, bad deadline headers and a client that
sends its headers slowly. The real gateway (servicer, interceptors, REST
transcoder) on port 0 over fake downstream services."""
from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest
from aiohttp import ClientSession, ClientTimeout, TCPConnector

from services.gateway.api.edge_rules import MAX_TIMEOUT_SECONDS

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]

JSON = {"Content-Type": "application/json"}
BATCH_DELETE = "/v1/collections/default/documents:batchDelete"
INGEST = "/v1/documents:ingest"


async def send(url: str, method: str, path: str, body: bytes | str | None = None, headers: dict | None = None) -> tuple[int, dict, str]:
    async with ClientSession() as session:
        async with session.request(method, url + path, data=body, headers=headers or {}) as reply:
            return reply.status, dict(reply.headers), await reply.text()


def writes(retriever) -> list[str]:
    """The writing RPCs that reached a fake retriever."""
    return [rpc for rpc, _ in retriever.calls if rpc in ("delete_documents", "ingest_documents", "delete_collection")]


@pytest.fixture
def counting():
    from tests.fakes import FakeRetriever
    from tests.fixtures.fake_gateway import ARTICLE

    return FakeRetriever("retriever_pg", [ARTICLE])


# 1. Cross-site request forgery -------------------------------------------

@pytest.mark.parametrize("content_type", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None,
                                          # JSON in another charset would be read as UTF-8 and garbled (a fresh user's trial)
                                          "application/json; charset=latin1", 'application/json;charset="ISO-8859-1"'])
async def test_a_write_that_is_not_json_is_415_and_reaches_no_store(fake_gateway, counting, content_type):
    gw = await fake_gateway(pg=counting)
    body = json.dumps({"names": ["collections/default/documents/1"]})
    headers = {"Content-Type": content_type} if content_type else {}
    status, _, text = await send(gw.rest_url, "POST", BATCH_DELETE, body.encode(), headers)
    assert status == 415, text
    error = json.loads(text)["error"]
    assert error["details"][0]["fieldViolations"][0]["field"] == "Content-Type"
    status, _, _ = await send(gw.rest_url, "POST", INGEST, json.dumps({"jsonl": ""}).encode(), headers)
    assert status == 415 and writes(counting) == []


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/json;charset=UTF8",
                                          'Application/JSON; charset="utf-8"', "application/json; foo=bar"])
async def test_json_in_utf8_with_any_spelling_of_its_parameters_is_read(fake_gateway, counting, content_type):
    gw = await fake_gateway(pg=counting)
    status, _, text = await send(gw.rest_url, "POST", "/v1/query:search", json.dumps({"query": "年假"}).encode(),
                                 {"Content-Type": content_type})
    assert status == 200, text


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"},
    {"Origin": "null"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
])
async def test_a_cross_site_write_is_403_even_as_json(fake_gateway, counting, headers):
    gw = await fake_gateway(pg=counting)
    body = json.dumps({"names": ["collections/default/documents/1"]}).encode()
    status, _, text = await send(gw.rest_url, "POST", BATCH_DELETE, body, {**JSON, **headers})
    assert status == 403 and json.loads(text)["error"]["status"] == "PERMISSION_DENIED"
    assert writes(counting) == []


async def test_a_second_origin_after_an_allowed_one_is_400_and_reaches_no_store(fake_gateway, counting):
    from multidict import CIMultiDict

    gw = await fake_gateway(pg=counting)
    body = json.dumps({"names": ["collections/default/documents/1"]}).encode()
    for first, second in ((gw.rest_url, "https://evil.example"), ("https://evil.example", gw.rest_url)):
        headers = CIMultiDict([("Content-Type", "application/json"), ("Origin", first), ("Origin", second)])
        status, _, text = await send(gw.rest_url, "POST", BATCH_DELETE, body, headers)
        assert status == 400, text
        assert json.loads(text)["error"]["details"][0]["fieldViolations"][0]["field"] == "Origin"
    status, _, _ = await send(gw.rest_url, "POST", BATCH_DELETE, body, {**JSON, "Origin": gw.rest_url})
    assert status == 200 and writes(counting) == ["delete_documents"]


async def test_same_origin_allowed_origins_and_non_browser_clients_may_write(fake_gateway, counting):
    gw = await fake_gateway(pg=counting, rest={"cors_origins": ["https://console.example"]})
    body = json.dumps({"names": ["collections/default/documents/1"]}).encode()
    own = gw.rest_url  # the console's own origin: http://127.0.0.1:PORT
    for extra in ({}, {"Origin": own, "Sec-Fetch-Site": "same-origin"}, {"Origin": "https://console.example", "Sec-Fetch-Site": "cross-site"}):
        status, _, text = await send(gw.rest_url, "POST", BATCH_DELETE, body, {**JSON, **extra})
        assert status == 200, (extra, text)
    assert writes(counting) == ["delete_documents"] * 3


async def test_reads_stay_open_to_cross_site_get_without_cors_headers(fake_gateway):
    gw = await fake_gateway()
    status, headers, _ = await send(gw.rest_url, "GET", "/v1/collections", headers={"Origin": "http://evil.example"})
    assert status == 200 and "Access-Control-Allow-Origin" not in headers  # the browser keeps the reply from the page


# 2. DNS rebinding -----------------------------------------------------------

@pytest.mark.parametrize("path", ["/v1/collections", "/", "/openapi.json"])
async def test_a_foreign_host_is_refused_on_every_route(fake_gateway, path):
    gw = await fake_gateway()
    status, _, text = await send(gw.rest_url, "GET", path, headers={"Host": "evil.example.com"})
    assert status == 403 and "evil.example.com" in json.loads(text)["error"]["message"]


@pytest.mark.parametrize("host", ["localhost:8080@evil.com", "127.0.0.1:abc", "[::1]x", "evil.example.com.", "a b"])
async def test_a_malformed_host_is_refused(fake_gateway, host):
    gw = await fake_gateway()
    status, _, _ = await send(gw.rest_url, "GET", "/v1/collections", headers={"Host": host})
    assert status == 403


@pytest.mark.parametrize("host", ["localhost:8080", "127.0.0.1", "[::1]:8080", "app.localhost", "10.1.2.3:80", "localhost."])
async def test_loopback_names_and_ip_literals_are_served(fake_gateway, host):
    gw = await fake_gateway()
    status, _, _ = await send(gw.rest_url, "GET", "/v1/collections", headers={"Host": host})
    assert status == 200


async def test_configured_hosts_are_served(fake_gateway):
    gw = await fake_gateway(rest={"allowed_hosts": ["graphmesh.example.org", ".corp.example"]})
    for host, expected in (("graphmesh.example.org", 200), ("api.corp.example:443", 200), ("corp.example.evil.com", 403)):
        status, _, _ = await send(gw.rest_url, "GET", "/v1/collections", headers={"Host": host})
        assert status == expected, host


# 3. Concurrency: queue, never 503 -----------------------------------------

async def test_300_concurrent_requests_get_no_503(fake_gateway):
    from tests.fakes import FakeRetriever
    from tests.fixtures.fake_gateway import ARTICLE

    class SlowRetriever(FakeRetriever):
        """Answers after 0.3 s, so that all 300 requests are in flight at once."""

        async def retrieve(self, request, timeout):
            await asyncio.sleep(0.3)
            return await super().retrieve(request, timeout)

    gw = await fake_gateway(pg=SlowRetriever("retriever_pg", [ARTICLE]), deadlines={"retrieve": 20.0})
    body = json.dumps({"query": "测试", "topK": 3})

    # limit=0: aiohttp's client opens at most 100 connections by default.
    async with ClientSession(timeout=ClientTimeout(total=120), connector=TCPConnector(limit=0)) as session:
        async def one() -> int:
            async with session.post(gw.rest_url + "/v1/query:search", data=body, headers=JSON) as reply:
                await reply.read()
                return reply.status

        statuses = await asyncio.gather(*(one() for _ in range(300)))
    assert statuses.count(200) == 300, {s: statuses.count(s) for s in set(statuses)}


async def test_a_full_admission_queue_is_429_with_retry_after(fake_gateway):
    from tests.fakes import FakeRetriever

    slow = FakeRetriever("retriever_pg", fail="hang")  # holds its slot until the deadline
    gw = await fake_gateway(pg=slow, graph=FakeRetriever("retriever_graph", fail="hang"),
                            rest={"max_in_flight": 2, "max_queued": 1}, deadlines={"retrieve": 2.0})
    body = json.dumps({"query": "测试"})
    async with ClientSession(timeout=ClientTimeout(total=60)) as session:
        async def one() -> tuple[int, str | None]:
            async with session.post(gw.rest_url + "/v1/query:search", data=body, headers=JSON) as reply:
                await reply.read()
                return reply.status, reply.headers.get("Retry-After")

        results = await asyncio.gather(*(one() for _ in range(6)))
    refused = [r for r in results if r[0] == 429]
    assert len(refused) == 3 and all(int(after) >= 1 for _, after in refused), results
    assert not [r for r in results if r[0] == 503]


# 4. Hostile JSON ------------------------------------------------------------

async def test_deeply_nested_json_body_is_400_not_500(fake_gateway):
    gw = await fake_gateway()
    deep = '{"query": "x", "filters": ' + "[" * 100_000 + "]" * 100_000 + "}"
    status, _, text = await send(gw.rest_url, "POST", "/v1/query:search", deep.encode(), JSON)
    assert status == 400 and json.loads(text)["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize("kind", ["documents", "entities"])
async def test_a_deeply_nested_jsonl_line_fails_alone_and_the_rest_is_stored(fake_gateway, kind):
    from graphmesh.gateway.v1 import gateway_pb2

    gw = await fake_gateway()
    if kind == "documents":
        good = [json.dumps({"id": "a", "text": "第一条 好的。"}), json.dumps({"id": "b", "text": "第二条 也好。"})]
        request_kind = gateway_pb2.INGEST_KIND_DOCUMENTS
    else:
        good = [json.dumps({"name": "甲"}, ensure_ascii=False), json.dumps({"name": "乙"}, ensure_ascii=False)]
        request_kind = gateway_pb2.INGEST_KIND_ENTITIES
    hostile = '{"id": "x", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}"
    payload = "\n".join([good[0], hostile, good[1]]).encode()
    reply = await gw.stub.Ingest(gateway_pb2.IngestRequest(jsonl=payload, kind=request_kind), timeout=30)
    assert [f.index for f in reply.failures] == [1]
    assert "nested" in reply.failures[0].reason
    assert reply.received == 3 and reply.stored + reply.unchanged == 2


# 5. Hostile console paths ---------------------------------------------------

@pytest.mark.parametrize("path", ["/console/%00", "/console/index.html%00.js", "/console/app.js%00", "/console/..%2fapp.js"])
async def test_hostile_console_paths_are_404_json(fake_gateway, path):
    gw = await fake_gateway()
    status, headers, text = await send(gw.rest_url, "GET", path)
    assert status == 404 and json.loads(text)["error"]["status"] == "NOT_FOUND"


# 6. Deadline headers --------------------------------------------------------

@pytest.mark.parametrize("header,value", [("X-Timeout-Seconds", "inf"), ("X-Timeout-Seconds", "nan"), ("X-Timeout-Seconds", "-1"),
                                          ("X-Timeout-Seconds", "0"), ("X-Timeout-Seconds", "soon"), ("X-Timeout-Seconds", "1_0"),
                                          ("X-Timeout-Seconds", str(MAX_TIMEOUT_SECONDS * 2)), ("grpc-timeout", "infS"),
                                          ("grpc-timeout", "5"), ("grpc-timeout", "1.5S")])
async def test_a_bad_deadline_header_is_400_naming_it(fake_gateway, header, value):
    gw = await fake_gateway()
    status, _, text = await send(gw.rest_url, "POST", "/v1/query:search", json.dumps({"query": "测试"}).encode(),
                                 {**JSON, header: value})
    assert status == 400, text
    error = json.loads(text)["error"]
    assert error["details"][0]["fieldViolations"][0]["field"] == header
    assert error["message"].count(header) == 1  # named once, not repeated


async def test_a_good_deadline_header_is_used(fake_gateway):
    gw = await fake_gateway()
    for header, value in (("X-Timeout-Seconds", "5"), ("grpc-timeout", "5000m")):
        status, _, _ = await send(gw.rest_url, "POST", "/v1/query:search", json.dumps({"query": "测试"}).encode(), {**JSON, header: value})
        assert status == 200


# 8. Slow clients ------------------------------------------------------------

async def test_a_client_sending_headers_slowly_is_disconnected(fake_gateway):
    gw = await fake_gateway(rest={"header_timeout": 1.0})
    host, port = gw.rest_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /v1/collections HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    await writer.drain()
    start = time.monotonic()
    closed = False
    for i in range(10):  # one header line a second, never the blank line
        await asyncio.sleep(0.5)
        try:
            writer.write(f"X-Slow-{i}: 1\r\n".encode())
            await writer.drain()
        except ConnectionError:
            closed = True
            break
        if reader.at_eof():
            closed = True
            break
    if not closed:
        closed = await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    assert closed and time.monotonic() - start < 5.5


async def test_a_connection_with_requests_in_flight_is_not_cut(fake_gateway):
    from tests.fakes import FakeRetriever

    gw = await fake_gateway(rest={"header_timeout": 0.5}, pg=FakeRetriever("retriever_pg", fail="hang"),
                            graph=FakeRetriever("retriever_graph", fail="hang"), deadlines={"retrieve": 2.0})
    status, _, _ = await send(gw.rest_url, "POST", "/v1/query:search", json.dumps({"query": "测试"}).encode(), JSON)
    assert status == 504  # the request ran its 2 s to the end, past the 0.5 s header timeout


async def test_a_body_that_never_arrives_is_408_not_held_open(fake_gateway):
    gw = await fake_gateway(rest={"body_timeout": 0.5, "header_timeout": 30.0})
    host, port = gw.rest_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /v1/query:search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{")
    await writer.drain()
    head = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    assert b" 408 " in head


async def test_a_request_without_a_host_header_is_400_and_one_log_line_not_a_traceback(fake_gateway, caplog):
    # a fresh user's trial: aiohttp answered 400 and logged the parse error with its traceback at ERROR
    gw = await fake_gateway()
    host, port = gw.rest_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    with caplog.at_level(logging.INFO, logger="aiohttp.server"):
        writer.write(b"GET /v1/collections HTTP/1.1\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        await asyncio.sleep(0.1)
    assert b" 400 " in head
    records = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert records and all(r.levelno == logging.WARNING and not r.exc_info for r in records)
    assert "Host" in records[0].getMessage()
