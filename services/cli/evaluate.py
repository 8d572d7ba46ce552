"""``graphmesh eval``: runs a labelled query set through the gateway and
reports retrieval metrics.

Dataset: JSONL of {"id", "query", "gold": [ids]}. A result counts as the
document (or entity) id it belongs to; ranks count distinct ids. recall@k is
"any gold in the top k", as in shared/data/README.md.
"""
from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.clients import channel
from services.judge import core as metrics


@dataclass
class QueryRow:
    """Per-query outcome."""

    id: str
    ranked: list[str]
    gold: list[str]
    first_gold_rank: int | None
    latency_ms: float
    degraded: list[str]
    error: str = ""


def load_dataset(path: Path, limit: int | None = None) -> list[dict]:
    """Reads the JSONL dataset (at most ``limit`` rows)."""
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
                if limit and len(rows) >= limit:
                    break
    return rows


async def run_queries(address: str, dataset: list[dict], top_k: int, concurrency: int, timeout: float, entities: bool = False) -> list[QueryRow]:
    """Calls Search (or SearchEntities when ``entities``: ranks are entity
    names) for every query, ``concurrency`` at a time."""
    ch = channel(address)
    stub = gateway_pb2_grpc.GatewayServiceStub(ch)
    gate = asyncio.Semaphore(concurrency)

    async def one(row: dict) -> QueryRow:
        gold = [str(g) for g in row.get("gold", [])]
        async with gate:
            started = time.perf_counter()
            try:
                if entities:
                    reply = await stub.SearchEntities(
                        gateway_pb2.SearchEntitiesRequest(query=row["query"], top_k=min(top_k, 100)), timeout=timeout)
                else:
                    reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=top_k), timeout=timeout)
            except grpc.aio.AioRpcError as err:
                return QueryRow(str(row.get("id")), [], gold, None, 0.0, [], f"{err.code().name}: {err.details()}")
            latency = (time.perf_counter() - started) * 1000
        if entities:
            ranked = metrics.dedupe([e.name for e in reply.entities])
        else:
            ranked = metrics.dedupe([c.document_id or c.id for c in reply.results])
        return QueryRow(str(row.get("id")), ranked, gold, metrics.first_gold_rank(ranked, set(gold)), latency, list(reply.degraded))

    try:
        return await asyncio.gather(*(one(r) for r in dataset))
    finally:
        await ch.close()


def summarise(rows: list[QueryRow]) -> dict:
    """Mean metrics over ``rows``: recall@1/5/10, mrr@10, ndcg@10, n, plus
    errors and latency percentiles (milliseconds)."""
    n = len(rows)

    def mean(values: list[float]) -> float:
        return round(sum(values) / n, 4) if n else 0.0

    latencies = sorted(r.latency_ms for r in rows if not r.error)
    summary = {
        "recall@1": mean([metrics.hit_at(r.ranked, set(r.gold), 1) for r in rows]),
        "recall@5": mean([metrics.hit_at(r.ranked, set(r.gold), 5) for r in rows]),
        "recall@10": mean([metrics.hit_at(r.ranked, set(r.gold), 10) for r in rows]),
        "mrr@10": mean([metrics.mrr_at(r.ranked, set(r.gold), 10) for r in rows]),
        "ndcg@10": mean([metrics.ndcg_at(r.ranked, set(r.gold), 10) for r in rows]),
        "n": n,
        "errors": sum(1 for r in rows if r.error),
        "degraded": sum(1 for r in rows if r.degraded),
    }
    if latencies:
        summary["latency_ms_p50"] = round(statistics.median(latencies), 1)
        summary["latency_ms_p95"] = round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 1)
    return summary
