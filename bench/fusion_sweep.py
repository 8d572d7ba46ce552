"""Fusion sweep (benchmark, not a test): how channel weights and the fusion
method change quality on a labelled query set.

Collects every retriever's channels once per query through the running
services (expander + both retrievers), then fuses offline with
services.fuser.core for each configuration, so a sweep of many
configurations costs one pass of retrieval.

    python bench/fusion_sweep.py --dataset ../shared/data/law-zh/queries-scenario-dev.jsonl

Several --dataset options are collected one after the other; each weight
configuration is then ranked by its mean over the sets (each set weighs the
same, whatever its size), and its figures on each set are printed.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from pathlib import Path

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.cli.evaluate import load_dataset
from services.common.clients import channel
from services.fuser.convert import candidate_to_item
from services.common.settings import MeshAddresses
from services.fuser import core
from services.judge import core as metrics


async def collect(dataset: list[dict], top_k: int) -> list[tuple[dict, list[list[core.Item]]]]:
    addresses = MeshAddresses()
    expander = expander_pb2_grpc.ExpanderServiceStub(channel(addresses.expander_addr))
    retrievers = [
        retriever_pb2_grpc.RetrieverServiceStub(channel(addresses.retriever_pg_addr)),
        retriever_pb2_grpc.RetrieverServiceStub(channel(addresses.retriever_graph_addr)),
    ]
    gate = asyncio.Semaphore(4)

    async def one(row: dict):
        async with gate:
            expanded = await expander.Expand(expander_pb2.ExpandRequest(query=row["query"], embed=True), timeout=60)
            request = retriever_pb2.RetrieveRequest(
                query=expanded.normalized_query, keywords=expanded.keywords, query_embedding=expanded.embedding, top_k=top_k
            )
            replies = await asyncio.gather(*(r.Retrieve(request, timeout=60) for r in retrievers))
        return row, [[candidate_to_item(c) for c in reply.candidates] for reply in replies]

    return await asyncio.gather(*(one(r) for r in dataset))


def evaluate(collected, weights: dict[str, float], method: str) -> dict[str, float]:
    """Fuses each query's lists with ``weights`` (channels not listed weigh 0)."""
    seen = {s.channel for _, lists in collected for lst in lists for it in lst for s in it.scores}
    weights = {**{c: 0.0 for c in seen}, **weights}
    totals = {"recall@1": 0.0, "recall@10": 0.0, "mrr@10": 0.0}
    for row, lists in collected:
        items = core.merge([[_copy(i) for i in lst] for lst in lists])
        items = [it for it in items if any(weights.get(s.channel, 0) > 0 for s in it.scores)]
        fused = core.rrf_scores(items, weights) if method == "rrf" else core.weighted_scores(items, weights)
        ranked = metrics.dedupe([it.document_id for it in core.rank(items, fused, 50)])
        gold = {str(g) for g in row["gold"]}
        totals["recall@1"] += metrics.hit_at(ranked, gold, 1)
        totals["recall@10"] += metrics.hit_at(ranked, gold, 10)
        totals["mrr@10"] += metrics.mrr_at(ranked, gold, 10)
    return {k: round(v / len(collected), 4) for k, v in totals.items()}


def _copy(item: core.Item) -> core.Item:
    return core.Item(item.id, item.document_id, item.title, item.heading_path, item.text, item.source, item.ordinal,
                     [core.Scored(s.channel, s.score, s.rank, s.evidence) for s in item.scores])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", required=True, action="append")
    parser.add_argument("--top-k", type=int, default=30)
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    sets = {}
    for path in args.dataset:
        started = time.perf_counter()
        sets[Path(path).stem] = asyncio.run(collect(load_dataset(Path(path), args.limit), args.top_k))
        print(f"{Path(path).stem}: collected {len(sets[Path(path).stem])} queries in {time.perf_counter() - started:.1f}s")
    channels = ["pg.keyword", "pg.vector", "graph.fulltext", "graph.heading", "pg.fulltext", "pg.boost"]
    for name in channels:
        only = {c: (1.0 if c == name else 0.0) for c in channels}
        print(json.dumps({"only": name, **{k: evaluate(v, only, "rrf") for k, v in sets.items()}}, ensure_ascii=False))
    grid = [0.0, 0.25, 0.5, 1.0]
    results = []
    for w in itertools.product(grid, [1.0], [0.0], grid, [0.0, 0.25, 0.5], [0.0]):
        weights = dict(zip(channels, w))
        for method in ("rrf", "weighted"):
            per_set = {k: evaluate(v, weights, method) for k, v in sets.items()}
            mean = {m: round(sum(f[m] for f in per_set.values()) / len(per_set), 4) for m in ("recall@1", "recall@10", "mrr@10")}
            results.append((mean, method, weights, per_set))
    for key in ("mrr@10", "recall@10"):
        print(f"best by mean {key}:")
        results.sort(key=lambda r: (-r[0][key], -r[0]["mrr@10"] - r[0]["recall@10"]))
        for mean, method, weights, per_set in results[:8]:
            print(json.dumps({"method": method, "mean": mean, "weights": weights, **per_set}, ensure_ascii=False))
    default = {"pg.keyword": 1.0, "pg.vector": 1.0, "graph.heading": 0.25, "pg.fulltext": 0.25}
    print("current default:", json.dumps({k: evaluate(v, default, "weighted") for k, v in sets.items()}))


if __name__ == "__main__":
    main()
