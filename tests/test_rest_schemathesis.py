"""Schemathesis, fixed seed: generated requests (positive and
schema-violating) for every operation of the OpenAPI document the gateway
serves, sent to the real gateway over fakes (tests/threaded_gateway.py)
with API keys required and the caller's key and own Origin on every
request. No answer may be a 5xx, and each status code, media type and body
must be one the document declares (tests/openapi_fuzz.py). The long runs
are bench/rest_schemathesis.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from schemathesis import GenerationMode

from services.gateway.api.auth import new_key
from tests.openapi_fuzz import fuzz_operation, served_schema, server_error
from tests.threaded_gateway import start_threaded_gateway

pytestmark = pytest.mark.contract

CASES = 40
SEED = 26
DOCUMENT = json.loads((Path(__file__).resolve().parents[1] / "services/gateway/static/openapi.json").read_text())
LABELS = sorted(f"{verb.upper()} {path}" for path, item in DOCUMENT["paths"].items() for verb in item)


@pytest.fixture(scope="module")
def gateway():
    key, record = new_key("schemathesis")
    gw = start_threaded_gateway(auth={"enabled": True, "api_keys": record.line()})
    headers = {"Authorization": f"Bearer {key}", "Origin": gw.rest_url}
    schema, labels = served_schema(gw.rest_url, headers)
    operations = {labels[r.ok().label]: r.ok() for r in schema.get_all_operations()}
    try:
        yield gw, headers, operations
    finally:
        gw.stop()


def test_every_served_operation_is_fuzzed(gateway):
    _, _, operations = gateway
    assert sorted(operations) == LABELS


@pytest.mark.parametrize("label", LABELS)
def test_generated_requests_get_declared_answers_and_no_server_error(gateway, label):
    gw, headers, operations = gateway
    report = fuzz_operation(operations[label], label, gw.rest_url, headers, CASES, SEED)
    assert report.cases >= 10, report
    assert not report.failures, (dict(report.failures), report.examples)
    assert not [s for s in report.statuses if s == "no answer" or s >= 500 and s != 504], report.statuses
    assert report.statuses[504] == report.own_deadline_504
    assert any(400 <= s < 500 for s in report.statuses), report.statuses  # negative cases reach validation
    assert gw.alive


def test_requests_without_the_key_are_refused_with_a_declared_401(gateway):
    gw, headers, operations = gateway
    # (a body the transcoder cannot parse is a 400 before the gRPC call checks the key)
    report = fuzz_operation(operations["POST /v1/query:search"], "search", gw.rest_url, {"Origin": headers["Origin"]}, 30, SEED)
    # A sub-second X-Timeout-Seconds may run out before the key is checked:
    # a 504 that is the request's own deadline (counted apart) is allowed.
    own_deadline = {504} if report.statuses[504] == report.own_deadline_504 else set()
    assert report.statuses[401] > 0 and set(report.statuses) - own_deadline <= {400, 401}, report
    assert not report.failures, report


def test_schema_valid_headers_are_accepted(gateway):
    # Regression: X-Timeout-Seconds was declared as any number; the gateway
    # answers 400 outside (0, 86400], so schema-valid requests were refused.
    gw, headers, operations = gateway
    operation = operations["GET /v1/collections"]
    session = requests.Session()
    seen = set()
    from hypothesis import HealthCheck, given, seed, settings

    @seed(SEED)
    @settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    def run(case):
        reply = case.call(base_url=gw.rest_url, session=session, headers=headers, timeout=30)
        seen.add(case.headers.get("X-Timeout-Seconds") if case.headers else None)
        asked = float(case.headers["X-Timeout-Seconds"]) if case.headers and "X-Timeout-Seconds" in case.headers else 1.0
        assert reply.status_code == 200 or (reply.status_code == 504 and asked < 1.0), (case.headers, reply.text[:300])

    run()
    assert len(seen) > 3, seen


def test_the_checks_report_a_body_the_document_does_not_declare(gateway):
    # The conformance checks can fail: with a document that requires a field
    # the gateway never sends, every 200 is a failure.
    gw, headers, _ = gateway
    import schemathesis

    document = json.loads(json.dumps(DOCUMENT))
    document["servers"] = [{"url": gw.rest_url}]
    ok = document["paths"]["/v1/domainPacks"]["get"]["responses"]["200"]["content"]["application/json"]
    ok["schema"] = {"type": "object", "required": ["notAField"]}
    operation = next(r.ok() for r in schemathesis.openapi.from_dict(document).get_all_operations()
                     if r.ok().label == "GET /v1/domainPacks")
    report = fuzz_operation(operation, "GET /v1/domainPacks", gw.rest_url, headers, 20, SEED)
    assert report.statuses[200] > 0 and sum(report.failures.values()) == report.statuses[200], report


class _Case:
    def __init__(self, headers):
        self.headers = headers


@pytest.mark.parametrize("status,headers,failed", [
    (500, {}, True), (503, {}, True), (504, {}, True), (504, {"X-Timeout-Seconds": "5"}, True),
    (504, {"X-Timeout-Seconds": "1e-9"}, False), (504, {"X-Timeout-Seconds": "soon"}, True), (400, {}, False),
    (200, {"X-Timeout-Seconds": "1e-9"}, False),
])
def test_server_error_excuses_only_a_504_on_the_callers_own_tiny_deadline(status, headers, failed):
    assert (server_error(_Case(headers), status) is not None) == failed
