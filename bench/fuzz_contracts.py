"""Fuzzed contracts, long run (not a test): ``--cases`` generated requests per
public RPC of the gateway (tests/proto_fuzz.py: built from the proto
descriptors), the same per REST route (the OpenAI-compatible chat route with
tests/proto_fuzz.chat_body), and JSONL ingest payloads, against
the real gateway over fakes (tests/threaded_gateway.py) or, with
``--target ADDRESS``, a running stack's gateway (loopback only). Counts
status codes per RPC; any INTERNAL / UNKNOWN / DATA_LOSS, a call that
outlives its deadline by more than 2 s, or a gateway that stops serving is
a finding (printed with the request's first bytes).

    python bench/fuzz_contracts.py [--cases 10000] [--seed 16] [--target 127.0.0.1:54101] [--rest-url URL]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
import httpx  # noqa: E402
from hypothesis import HealthCheck, given, settings, seed as hseed, strategies as st  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2  # noqa: E402
from tests.proto_fuzz import (REST_BODY_ROUTES, REST_PARAM_ROUTES, chat_body, fill_route, json_body, json_payload,  # noqa: E402
                              jsonl_records, message_bytes, query_params, resource_names)

SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"]
BAD = {"INTERNAL", "UNKNOWN", "DATA_LOSS"}
ROUTES = REST_BODY_ROUTES


def run_case(fn, strategy, cases: int, seed: int) -> None:
    @hseed(seed)
    @settings(max_examples=cases, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def inner(value) -> None:
        fn(value)

    inner()


def main() -> None:
    from _common import save

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--target", default="", help="gateway address of a running stack (default: over fakes)")
    parser.add_argument("--rest-url", default="")
    parser.add_argument("--rest-cases", type=int, default=None, help="cases per REST route (default: --cases; 0 = none)")
    args = parser.parse_args()
    gateway = None
    if args.target:
        if not args.target.startswith(("127.", "localhost")):
            raise SystemExit("loopback only")
        address, rest_url = args.target, args.rest_url
    else:
        from tests.threaded_gateway import start_threaded_gateway

        gateway = start_threaded_gateway()
        address, rest_url = gateway.address, gateway.rest_url
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 * 2**20)])
    codes: dict[str, Counter] = {}
    findings: list[dict] = []
    started = time.monotonic()

    def grpc_call(method, label: str = ""):
        path = f"/{SERVICE.full_name}/{method.name}"
        label = label or method.name

        def fn(payload: bytes) -> None:
            t0 = time.monotonic()
            try:
                if method.server_streaming:
                    for _ in channel.unary_stream(path)(payload, timeout=args.deadline):
                        pass
                else:
                    channel.unary_unary(path)(payload, timeout=args.deadline)
                code = "OK"
            except grpc.RpcError as err:
                code = err.code().name
            codes.setdefault(label, Counter())[code] += 1
            if code in BAD or time.monotonic() - t0 > args.deadline + 2:
                findings.append({"rpc": label, "code": code, "seconds": round(time.monotonic() - t0, 2),
                                 "request": payload[:200].hex()})
        return fn

    for method in SERVICE.methods:
        run_case(grpc_call(method), message_bytes(method.input_type), args.cases, args.seed)
        print(f"{method.name:16s} {dict(codes[method.name])}", flush=True)
    ingest = grpc_call(SERVICE.methods_by_name["Ingest"], "Ingest(jsonl)")
    run_case(lambda p: ingest(gateway_pb2.IngestRequest(jsonl=p[0], kind=p[1]).SerializeToString()),
             st.tuples(jsonl_records(), st.sampled_from(gateway_pb2.IngestKind.values())), args.cases, args.seed)
    print(f"{'Ingest(jsonl)':16s} {dict(codes['Ingest(jsonl)'])}", flush=True)
    rest_cases = args.cases if args.rest_cases is None else args.rest_cases
    if rest_url and rest_cases:
        with httpx.Client(base_url=rest_url, timeout=args.deadline) as http:
            def record(key: str, path: str, reply: httpx.Response) -> None:
                codes.setdefault(key, Counter())[reply.status_code] += 1
                if reply.status_code >= 500 and reply.status_code not in (503, 504):
                    findings.append({"route": key, "path": path[:200], "status": reply.status_code, "body": reply.text[:200]})

            for route, name in ROUTES.items():
                def post(case, route=route) -> None:
                    body, parent = case
                    path = fill_route(route, parent)
                    record(route, path, http.post(path, content=json_payload(body), headers={"Content-Type": "application/json"}))
                run_case(post, st.tuples(json_body(gateway_pb2.DESCRIPTOR.message_types_by_name[name]), resource_names()),
                         rest_cases, args.seed)
                print(f"{route:24s} {dict(codes[route])}", flush=True)
            for route, methods in REST_PARAM_ROUTES.items():
                for verb in methods:
                    key = f"{verb} {route}"

                    def request(case, route=route, verb=verb, key=key) -> None:
                        name, params = case
                        path = fill_route(route, name)
                        record(key, path, http.request(verb, path, params=params))
                    run_case(request, st.tuples(resource_names(), query_params()), rest_cases, args.seed)
                    print(f"{key:24s} {dict(codes[key])}", flush=True)
            chat = "/v1/chat/completions"  # the OpenAI-compatible route (not an RPC)
            run_case(lambda body: record(chat, chat, http.post(chat, content=json_payload(body),
                                                               headers={"Content-Type": "application/json"})),
                     chat_body(), rest_cases, args.seed)
            print(f"{chat:24s} {dict(codes[chat])}", flush=True)
    alive = True
    try:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    except grpc.RpcError:
        alive = False
    channel.close()
    if gateway is not None:
        alive = alive and gateway.alive
        gateway.stop()
    save("fuzz_contracts", {"target": args.target or "gateway over fakes", "cases_per_rpc": args.cases,
                            "cases_per_rest_route": rest_cases if rest_url else 0,
                            "seed": args.seed, "seconds": round(time.monotonic() - started, 1),
                            "codes": {k: dict(v) for k, v in codes.items()}, "findings": findings[:100],
                            "finding_count": len(findings), "gateway_still_serving": alive})


if __name__ == "__main__":
    main()
