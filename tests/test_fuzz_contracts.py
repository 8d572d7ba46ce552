"""Fuzzed contracts, fixed seed (hypothesis, derandomized): requests built
from the proto descriptors (tests/proto_fuzz.py) for every public RPC of the
gateway, REST bodies for every route of the OpenAPI document, and JSONL
ingest payloads. Whatever arrives, the answer is a status the caller can act
on: never INTERNAL or UNKNOWN, never a hang past the deadline, and the
server keeps serving. The long runs (>= 10,000 cases per RPC) are
bench/fuzz_contracts.py; the real-mesh share is tests/e2e/test_fuzz_mesh.py.
"""
from __future__ import annotations

import json

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings, strategies as st

from graphmesh.gateway.v1 import gateway_pb2
from services.ingest.jsonl_documents import parse_jsonl
from services.ingest.jsonl_entities import parse_entities, parse_triples
from tests.proto_fuzz import (REST_BODY_ROUTES, REST_OPENAI_ROUTES, REST_PARAM_ROUTES, chat_body, json_body, json_payload,
                              jsonl_records, message_bytes, query_params, resource_names)
from tests.threaded_gateway import start_threaded_gateway

pytestmark = pytest.mark.contract

SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"]
METHODS = {m.name: m for m in SERVICE.methods}
#: Codes that would mean the gateway failed on its own input handling.
NEVER = {"INTERNAL", "UNKNOWN", "DATA_LOSS", "DEADLINE_EXCEEDED"}
DEADLINE = 10.0
FUZZ = settings(max_examples=40, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def gateway():
    gw = start_threaded_gateway()
    channel = grpc.insecure_channel(gw.address, options=[("grpc.max_send_message_length", 64 * 2**20)])
    try:
        yield gw, channel
    finally:
        channel.close()
        gw.stop()


def call(channel: grpc.Channel, method, payload: bytes) -> str:
    """Sends raw request bytes to ``method``; the status code name."""
    path = f"/{SERVICE.full_name}/{method.name}"
    try:
        if method.server_streaming:
            for _ in channel.unary_stream(path)(payload, timeout=DEADLINE):
                pass
        else:
            channel.unary_unary(path)(payload, timeout=DEADLINE)
    except grpc.RpcError as err:
        return err.code().name
    return "OK"


def still_serving(channel: grpc.Channel) -> bool:
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    return reply.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize("name", sorted(METHODS))
def test_generated_requests_never_break_a_public_rpc(gateway, name):
    gw, channel = gateway
    method = METHODS[name]
    seen: dict[str, int] = {}

    @FUZZ
    @given(payload=message_bytes(method.input_type))
    def run(payload: bytes) -> None:
        code = call(channel, method, payload)
        seen[code] = seen.get(code, 0) + 1
        assert code not in NEVER, (code, payload[:300])

    run()
    assert still_serving(channel) and gw.alive
    if method.input_type.fields:  # the generator reaches validation, so the check can fail
        assert "INVALID_ARGUMENT" in seen
    else:  # nothing to validate (ListCollectionsRequest): the empty request is answered
        assert seen == {"OK": seen.get("OK", 0)} and seen["OK"] >= 1


def test_invalid_utf8_in_a_string_field_is_invalid_argument(gateway):
    # Regression (issue 16 fuzzing): a request that protobuf cannot parse
    # (bad UTF-8 in a string field) was answered INTERNAL by grpc itself.
    _, channel = gateway
    payload = b"\x0a\x03a\xffb"  # field 1 (query), 3 bytes, invalid UTF-8
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary(f"/{SERVICE.full_name}/Search")(payload, timeout=DEADLINE)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "request" in err.value.details()


@FUZZ
@given(payload=jsonl_records(), kind=st.sampled_from(gateway_pb2.IngestKind.values()))
def test_generated_jsonl_ingest_payloads_never_break_ingest(gateway, payload, kind):
    _, channel = gateway
    request = gateway_pb2.IngestRequest(jsonl=payload, kind=kind).SerializeToString()
    assert call(channel, METHODS["Ingest"], request) not in NEVER


@settings(max_examples=150, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(payload=jsonl_records())
def test_jsonl_parsers_never_raise(payload):
    # Every non-blank line is either parsed or reported, never raised.
    lines = sum(1 for line in payload.split(b"\n") if line.strip())
    docs, failures = parse_jsonl(payload)
    assert len(docs) + len(failures) == lines
    for parse in (parse_entities, parse_triples):
        parsed, failures, _ = parse(payload)
        assert len(parsed) + len(failures) <= lines


ROUTES = REST_BODY_ROUTES
PARAM_ROUTES = REST_PARAM_ROUTES
RESOURCE_NAMES = resource_names()

def test_rest_routes_cover_the_openapi_document():
    from pathlib import Path

    document = json.loads((Path(__file__).resolve().parents[1] / "services/gateway/static/openapi.json").read_text())
    assert set(document["paths"]) == set(ROUTES) | set(PARAM_ROUTES) | set(REST_OPENAI_ROUTES)


def test_generated_chat_completion_bodies_get_an_openai_error_or_an_answer(gateway):
    gw, channel = gateway
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=gw.rest_url, timeout=DEADLINE) as http:
        @settings(max_examples=60, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(body=chat_body(), raw=st.sampled_from([None, None, None, b"{", b"[]", b"\xff\xfe", b"null", b"5"]))
        def run(body, raw) -> None:
            content = json_payload(body) if raw is None else raw
            reply = http.post("/v1/chat/completions", content=content, headers={"Content-Type": "application/json"})
            statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
            assert reply.status_code < 500 or reply.status_code == 503, (reply.status_code, reply.text[:300], content[:300])
            if reply.headers["content-type"].startswith("text/event-stream"):
                assert reply.status_code == 200 and reply.text.rstrip().endswith("data: [DONE]"), reply.text[-300:]
            elif reply.status_code >= 400:
                error = reply.json()["error"]
                assert set(error) == {"message", "type", "param", "code"} and error["message"], error
            else:
                assert reply.json()["object"] == "chat.completion"

        run()
        models = http.get("/v1/models")
        assert models.status_code == 200 and models.json()["data"][0]["id"] == "graphmesh"
    assert 400 in statuses and 200 in statuses and still_serving(channel) and gw.alive, statuses


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_generated_rest_bodies_get_a_client_error_or_an_answer(gateway, route):
    gw, channel = gateway
    descriptor = gateway_pb2.DESCRIPTOR.message_types_by_name[ROUTES[route]]
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=gw.rest_url, timeout=DEADLINE) as http:
        @settings(max_examples=25, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(body=json_body(descriptor), raw=st.sampled_from([None, b"{", b"[]", b"\xff\xfe", b"null", b'{"query": 1e999}']),
               parent=RESOURCE_NAMES)
        def run(body, raw, parent) -> None:
            content = json_payload(body) if raw is None else raw
            reply = http.post(route.replace("{parent}", parent), content=content, headers={"Content-Type": "application/json"})
            statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
            assert reply.status_code < 500 or reply.status_code == 503, (reply.status_code, reply.text[:300], content[:300])
            if reply.status_code >= 400:
                assert "error" in reply.json()

        run()
    assert 400 in statuses and still_serving(channel)


@pytest.mark.parametrize("route,method", [(r, m) for r in sorted(PARAM_ROUTES) for m in PARAM_ROUTES[r]])
def test_generated_paths_and_query_strings_get_a_client_error_or_an_answer(gateway, route, method):
    gw, channel = gateway
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=gw.rest_url, timeout=DEADLINE) as http:
        @settings(max_examples=25, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(name=RESOURCE_NAMES, params=query_params())
        def run(name, params) -> None:
            path = route.replace("{name}", name).replace("{parent}", name).replace("{operation}", name.rsplit("/", 1)[-1])
            reply = http.request(method, path, params=params)
            statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
            assert reply.status_code < 500 or reply.status_code == 503, (reply.status_code, reply.text[:300], path, params)
            if len(str(reply.request.url)) > 8000:
                # aiohttp's HTTP parser refuses a request line over 8190 bytes
                # before any route or middleware runs (plain-text 400)
                assert reply.status_code == 400 or reply.status_code < 300
            elif reply.status_code >= 400:
                assert "error" in reply.json()

        run()
    assert still_serving(channel) and gw.alive
    assert any(400 <= code < 500 for code in statuses), statuses  # unknown parameters, bad names
