"""Schemathesis against the gateway's served OpenAPI document (GET
/openapi.json), shared by tests/test_rest_schemathesis.py and
bench/rest_schemathesis.py.

``served_schema(rest_url)`` loads the document the gateway serves (its
resource-name paths written out as segments,
``/v1/collections/{collection}/documents/{document}``, so generated values
reach the routes). ``fuzz_operation`` runs schemathesis's generated cases,
positive and negative (schema-violating) mixed, against one operation with
the caller's headers (API key, own Origin: the edge's rules are met, not
switched off) and checks every response: no 5xx (server_error), and a
status code, media type and body the document declares for the operation
(CHECKS).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import httpx
import requests
import schemathesis
from hypothesis import HealthCheck, given, seed as hseed, settings, strategies as st
from schemathesis import GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance, status_code_conformance


#: Checks applied to every response; a 5xx is checked by server_error (not
#: schemathesis's not_a_server_error) to excuse a 504 on the caller's own tiny deadline.
CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]
#: A 504 is the right answer to a request whose X-Timeout-Seconds is below this (seconds).
OWN_DEADLINE = 1.0


@dataclass
class RouteReport:
    """What one operation got: cases sent, HTTP status counts, failed
    checks (title -> count) and the first few failing requests."""

    route: str
    cases: int = 0
    statuses: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    own_deadline_504: int = 0


def server_error(case, status: int) -> str | None:
    """The failure a 5xx answer is, or None: a 504 DEADLINE_EXCEEDED for a
    request that asked for less than OWN_DEADLINE seconds is its due."""
    if status < 500:
        return None
    try:
        asked = float((case.headers or {}).get("X-Timeout-Seconds", "inf"))
    except ValueError:
        asked = float("inf")
    if status == 504 and 0 < asked < OWN_DEADLINE:
        return None
    return f"server error {status}"


def served_schema(rest_url: str, headers: dict[str, str] | None = None):
    """The schemathesis schema of the document served at ``rest_url``/openapi.json
    and a map from its operation labels to "METHOD path"."""
    reply = httpx.get(rest_url + "/openapi.json", headers=headers or {}, timeout=30)
    reply.raise_for_status()
    document = reply.json()
    document["servers"] = [{"url": rest_url}]
    schema = schemathesis.openapi.from_dict(document)
    labels = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        labels[operation.label] = f"{operation.method.upper()} {operation.path}"
    return schema, labels


def fuzz_operation(operation, label: str, base_url: str, headers: dict[str, str], cases: int, seed: int,
                   timeout: float = 30.0, session: requests.Session | None = None) -> RouteReport:
    """Sends up to ``cases`` generated requests (hypothesis, ``seed``) to
    ``operation`` with ``headers`` and checks every response (CHECKS); a
    request the server drops (connection reset, timeout) counts as a
    failure too. Hypothesis may stop short of ``cases`` when an
    operation's inputs are exhausted (a route with only a header)."""
    report = RouteReport(label)
    session = session or requests.Session()
    strategy = st.one_of(operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
                         operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))

    @hseed(seed)
    @settings(max_examples=cases, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(case=strategy)
    def run(case) -> None:
        report.cases += 1
        try:
            response = case.call(base_url=base_url, session=session, headers=headers, timeout=timeout)
        except requests.RequestException as err:
            report.statuses["no answer"] += 1
            _failed(report, f"transport: {type(err).__name__}", f"{case.method} {case.formatted_path}: {err}")
            return
        report.statuses[response.status_code] += 1
        if (error := server_error(case, response.status_code)) is not None:
            _failed(report, error, f"{case.method} {case.formatted_path} -> {response.status_code} | headers "
                                   f"{dict(case.headers or {})} | body {str(case.body)[:200]!r} | reply {response.text[:200]!r}")
        elif response.status_code == 504:
            report.own_deadline_504 += 1
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except FailureGroup as group:
            for failure in group.exceptions:
                _failed(report, failure.title, f"{case.method} {case.formatted_path} -> {response.status_code}: "
                                                f"{failure.message[:300]} | body {str(case.body)[:200]!r} | "
                                                f"reply {response.text[:200]!r}")

    run()
    return report


def _failed(report: RouteReport, title: str, example: str) -> None:
    report.failures[title] += 1
    if len(report.examples) < 5:
        report.examples.append(example)
