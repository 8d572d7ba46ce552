"""REST fuzzing with schemathesis (not a test): ``--cases`` generated
requests per operation of the gateway's served OpenAPI document (GET
/openapi.json), positive and schema-violating ones mixed, seeded
(``--seed``), against the real gateway over fakes (tests/threaded_gateway.py,
with API keys required and a key of its own) or, with ``--url``, a running
stack's REST port (loopback only; ``--api-key`` when it requires keys).
Every request carries the key and the gateway's own Origin, so the edge's
Host, Origin and key rules are met rather than switched off.

Checks per response (tests/openapi_fuzz.py): no 5xx (a 504 on the
request's own deadline under 1 s excused and counted), a status code,
media type and body that the document declares for the operation. Prints
per route: cases run, status-code counts, failures with examples; saves
the figures to bench/results/.

    python bench/rest_schemathesis.py [--cases 10000] [--seed 26] [--url http://127.0.0.1:8080] [--api-key KEY]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402


def main() -> None:
    from _common import save
    from tests.openapi_fuzz import fuzz_operation, served_schema

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000, help="cases per operation")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--url", default="", help="REST base URL of a running gateway (default: one over fakes)")
    parser.add_argument("--api-key", default="", help="API key for --url when the gateway requires keys")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument("--only", action="append", default=[], help="fuzz only routes containing this text (repeatable)")
    args = parser.parse_args()
    gateway = None
    key = args.api_key
    if args.url:
        if not args.url.startswith(("http://127.", "http://localhost", "http://[::1]")):
            raise SystemExit("loopback only")
        base = args.url.rstrip("/")
    else:
        from services.gateway.api.auth import new_key
        from tests.threaded_gateway import start_threaded_gateway

        key, record = new_key("schemathesis")
        gateway = start_threaded_gateway(auth={"enabled": True, "api_keys": record.line()})
        base = gateway.rest_url
    headers = {"Origin": base, **({"Authorization": f"Bearer {key}"} if key else {})}
    schema, labels = served_schema(base, headers)
    session = requests.Session()
    started = time.monotonic()
    routes = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        label = labels[operation.label]
        if args.only and not any(part in label for part in args.only):
            continue
        t0 = time.monotonic()
        report = fuzz_operation(operation, label, base, headers, args.cases, args.seed, args.timeout, session)
        seconds = round(time.monotonic() - t0, 1)
        routes[label] = {"cases": report.cases, "seconds": seconds,
                         "statuses": {str(k): v for k, v in sorted(report.statuses.items(), key=str)},
                         "own_deadline_504": report.own_deadline_504,
                         "failures": dict(report.failures), "examples": report.examples}
        print(f"{label:42s} {report.cases:6d} cases {seconds:7.1f} s  {routes[label]['statuses']}  "
              f"failures {dict(report.failures) or 0}", flush=True)
        for example in report.examples:
            print(f"    {example[:500]}", flush=True)
    alive = requests.get(base + "/openapi.json", timeout=10).status_code == 200
    if gateway is not None:
        alive = alive and gateway.alive
        gateway.stop()
    save("rest_schemathesis", {
        "target": args.url or "gateway over fakes (API keys required)", "cases_per_operation": args.cases,
        "seed": args.seed, "seconds": round(time.monotonic() - started, 1),
        "cases": sum(r["cases"] for r in routes.values()),
        "failure_count": sum(sum(r["failures"].values()) for r in routes.values()),
        "routes": routes, "gateway_still_serving": alive})


if __name__ == "__main__":
    main()
