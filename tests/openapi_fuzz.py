"""Schemathesis against the gateway's served OpenAPI document (GET
/openapi.json), shared by tests/test_rest_schemathesis.py and
bench/rest_schemathesis.py.

``served_schema(rest_url)`` loads the document the gateway serves and
expands each AIP resource-name path variable into its segments
(``/v1/{name}`` becomes ``/v1/collections/{name_1}/documents/{name_2}``,
after the route's google.api.http template): OpenAPI has no multi-segment
path parameter, and a generated value with its "/" percent-encoded never
reaches the route. ``fuzz_operation`` runs schemathesis's generated cases,
positive and negative (schema-violating) mixed, against one operation with
the caller's headers (API key, own Origin: the edge's rules are met, not
switched off) and checks every response: no 5xx (server_error), and a
status code, media type and body the document declares for the operation
(CHECKS).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import httpx
import requests
import schemathesis
from hypothesis import HealthCheck, given, seed as hseed, settings, strategies as st
from schemathesis import GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance, status_code_conformance

from services.gateway.api.rest import http_routes

#: Checks applied to every response; a 5xx is checked by server_error (not
#: schemathesis's not_a_server_error) to excuse a 504 on the caller's own tiny deadline.
CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]
#: A 504 is the right answer to a request whose X-Timeout-Seconds is below this (seconds).
OWN_DEADLINE = 1.0
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)=([^}]*)\}")


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


def _expanded(template: str) -> tuple[str, str, dict[str, str]]:
    """(served path, expanded path, expanded parameter -> served one) of a
    google.api.http template ("/v1/{name=collections/*/documents/*}")."""
    served = _VARIABLE.sub(lambda m: "{" + m.group(1) + "}", template)
    params: dict[str, str] = {}

    def segments(m: re.Match) -> str:
        out = []
        for part in m.group(2).split("/"):
            if part in ("*", "**"):
                name = f"{m.group(1)}_{sum(1 for p in params.values() if p == m.group(1)) + 1}"
                params[name] = m.group(1)
                out.append("{" + name + "}")
            else:
                out.append(part)
        return "/".join(out)

    return served, _VARIABLE.sub(segments, template), params


def expand_resource_paths(document: dict) -> tuple[dict, dict[str, str]]:
    """``document`` with its resource-name path variables expanded (module
    docstring), and expanded path -> served path."""
    paths = {path: dict(item) for path, item in document["paths"].items()}
    served_of: dict[str, str] = {}
    for verb, template, _ in http_routes():
        served, expanded, params = _expanded(template)
        operation = paths.get(served, {}).pop(verb.lower(), None) if params else None
        if operation is None:
            continue
        kept = [p for p in operation.get("parameters", []) if not (p["in"] == "path" and p["name"] in params.values())]
        operation = {**operation, "parameters": [{"name": name, "in": "path", "required": True,
                                                  "schema": {"type": "string", "minLength": 1},
                                                  "description": f"a segment of {params[name]}"} for name in params] + kept}
        paths.setdefault(expanded, {})[verb.lower()] = operation
        served_of[expanded] = served
    paths = {path: item for path, item in paths.items() if item}
    return {**document, "paths": paths}, served_of


def served_schema(rest_url: str, headers: dict[str, str] | None = None):
    """The schemathesis schema of the document served at ``rest_url``/openapi.json
    (paths expanded), and a map from its operation labels to the served routes."""
    reply = httpx.get(rest_url + "/openapi.json", headers=headers or {}, timeout=30)
    reply.raise_for_status()
    document, served_of = expand_resource_paths(reply.json())
    document["servers"] = [{"url": rest_url}]
    schema = schemathesis.openapi.from_dict(document)
    labels = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        labels[operation.label] = f"{operation.method.upper()} {served_of.get(operation.path, operation.path)}"
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
