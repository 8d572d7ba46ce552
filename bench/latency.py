"""Latency benchmark (not a test): Search p50/p95/p99 end to end and per
stage through the running gateway, at concurrency 1 and 8, reranker off and
on (``SearchRequest.rerank``). Needs `graphmesh up` with a corpus ingested.

    python bench/latency.py [--queries 60] [--dataset FILE] [--cold] [--concurrency 1 8] [--rerank off on]

``--cold`` puts a fresh six-character prefix on each query, so no query
embedding is found in the expander's cache (issue 27's "cold" questions).

End to end = client-side wall time of the Search RPC; per stage = the
gateway's reported stage timings. The reranker "on" figures measure whatever
the reranker service does: without a cross-encoder directory configured it
fails fast and the answer is degraded (counted in "degraded").
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import LAW_DEV, percentiles, save  # noqa: E402

import grpc  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.evaluate import load_dataset  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402


async def run(queries: list[str], concurrency: int, rerank: bool, top_k: int, cold: bool = False) -> dict:
    """Sends every query once, ``concurrency`` in flight (each with a fresh
    prefix when ``cold``); returns e2e and per-stage percentiles
    (milliseconds), errors and degraded counts."""
    async with grpc.aio.insecure_channel(MeshAddresses().gateway_addr) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        await stub.Search(gateway_pb2.SearchRequest(query=queries[0], top_k=top_k, rerank=rerank), timeout=60)  # warm-up
        gate = asyncio.Semaphore(concurrency)
        e2e: list[float] = []
        stages: dict[str, list[float]] = defaultdict(list)
        errors = degraded = 0

        async def one(q: str) -> None:
            nonlocal errors, degraded
            if cold:
                q = f"{uuid.uuid4().hex[:6]} {q}"
            async with gate:
                started = time.perf_counter()
                try:
                    reply = await stub.Search(gateway_pb2.SearchRequest(query=q, top_k=top_k, rerank=rerank), timeout=60)
                except grpc.aio.AioRpcError:
                    errors += 1
                    return
                e2e.append((time.perf_counter() - started) * 1000)
                degraded += bool(reply.degraded)
                for t in reply.timings:
                    if t.duration_ms > 0:
                        stages[t.stage].append(t.duration_ms)

        started = time.perf_counter()
        await asyncio.gather(*(one(q) for q in queries))
        wall = time.perf_counter() - started
    return {"concurrency": concurrency, "rerank": rerank, "cold": cold, "queries": len(queries), "wall_s": round(wall, 2),
            "qps": round(len(queries) / wall, 2), "errors": errors, "degraded": degraded,
            "e2e_ms": percentiles(e2e), "stages_ms": {s: percentiles(v) for s, v in sorted(stages.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(LAW_DEV))
    parser.add_argument("--queries", type=int, default=60, help="queries per configuration")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--cold", action="store_true", help="a fresh prefix on each query (no cached embedding)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rerank", choices=("off", "on"), nargs="+", default=["off", "on"])
    args = parser.parse_args()
    queries = [r["query"] for r in load_dataset(Path(args.dataset), args.queries)]
    runs = []
    for rerank in (r == "on" for r in args.rerank):
        for concurrency in args.concurrency:
            result = asyncio.run(run(queries, concurrency, rerank, args.top_k, args.cold))
            print(f"rerank={'on' if rerank else 'off'} c={concurrency}{' cold' if args.cold else ''}: "
                  f"e2e {result['e2e_ms']} degraded={result['degraded']} errors={result['errors']}", flush=True)
            for stage, figures in result["stages_ms"].items():
                print(f"  {stage:24s} {figures}", flush=True)
            runs.append(result)
    save("latency", {"dataset": Path(args.dataset).name, "top_k": args.top_k, "runs": runs})


if __name__ == "__main__":
    main()
