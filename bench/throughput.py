"""Throughput benchmark (not a test): Search requests/s sustained for a fixed
time from a bounded closed-loop load generator on loopback, with error
counts. Needs `graphmesh up` with a corpus ingested.

    python bench/throughput.py [--seconds 60] [--concurrency 8] [--cold] [--dataset FILE ...]

Each of ``concurrency`` workers sends the dev-set queries in turn and waits
for each reply before the next (closed loop, so load never exceeds
``concurrency`` in flight); the run stops by itself after ``seconds`` and a
hard cap of ``max-requests``. Only 127.0.0.1 is targeted. ``--cold`` puts a
fresh 6-hex prefix before every query, so no query embedding (or sentence
score) comes from a cache: the price of a question never asked before.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import LAW_DEV, percentiles, save  # noqa: E402

import grpc  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.evaluate import load_dataset  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402


async def run(queries: list[str], seconds: float, concurrency: int, max_requests: int, top_k: int,
              cold: bool = False) -> dict:
    address = MeshAddresses().gateway_addr
    if not address.startswith(("127.", "localhost", "[::1]")):
        raise SystemExit(f"refusing to load {address}: loopback only")
    feed = itertools.cycle(queries)
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    degraded = sent = 0
    async with grpc.aio.insecure_channel(address) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        end = time.monotonic() + seconds

        async def worker() -> None:
            nonlocal degraded, sent
            while time.monotonic() < end and sent < max_requests:
                sent += 1
                query = f"{uuid.uuid4().hex[:6]} {next(feed)}" if cold else next(feed)
                started = time.perf_counter()
                try:
                    reply = await stub.Search(gateway_pb2.SearchRequest(query=query, top_k=top_k), timeout=30)
                except grpc.aio.AioRpcError as err:
                    errors[err.code().name] += 1
                    continue
                latencies.append((time.perf_counter() - started) * 1000)
                degraded += bool(reply.degraded)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return {"seconds": round(wall, 1), "concurrency": concurrency, "cold": cold, "requests": sent, "ok": len(latencies),
            "errors": dict(errors), "error_count": sum(errors.values()), "degraded": degraded,
            "requests_per_s": round(len(latencies) / wall, 2), "latency_ms": percentiles(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", default=[str(LAW_DEV)])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-requests", type=int, default=20000)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--cold", action="store_true", help="a fresh prefix on every query (no cached embeddings)")
    args = parser.parse_args()
    queries = [r["query"] for path in args.dataset for r in load_dataset(Path(path))]
    result = asyncio.run(run(queries, args.seconds, args.concurrency, args.max_requests, args.top_k, args.cold))
    save("throughput", {"dataset": [Path(p).name for p in args.dataset], **result})


if __name__ == "__main__":
    main()
