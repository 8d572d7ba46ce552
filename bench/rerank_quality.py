"""Rerank quality benchmark (not a test): what the reranker does to the
gateway's fused ranking, measured outside the gateway. Needs a running
stack (`graphmesh up`, corpus ingested) and a reranker at
GRAPHMESH_RERANKER_ADDR.

    python bench/rerank_quality.py --dataset FILE.jsonl [--top-n 20,50] [--limit N]
        [--alpha 0,0.3,0.5,0.7,1] [--concurrency 2] [--entities]

For each query: gateway Search with rerank off and top_k = the largest N
(the fused order), then one Rerank call per N over the first N fused
candidates ("heading path\\ntext", as the gateway sends them). Orders
compared by MRR@10 and recall@1/10 over distinct document ids (the eval's
keys): fused alone, and alpha x rerank score + (1 - alpha) x fused score,
both min-max normalised over the N candidates (alpha 1 = reranker alone);
candidates past N keep their fused order after the first N. Also the Rerank
call latency p50/p95. With --entities: SearchEntities (run the gateway with
rerank off), entity cards as the gateway builds them, keys = entity names.
Loopback only, bounded by the dataset and --limit.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentiles, save  # noqa: E402

import grpc  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc  # noqa: E402
from services.cli.evaluate import load_dataset  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402


class _Card:
    """An entity result in the shape the document path uses."""

    def __init__(self, e) -> None:
        self.title = self.document_id = self.id = e.name
        self.heading_path: list[str] = []
        # the card text the gateway sends (services/gateway/search/entity_search.py)
        self.text = "；".join(p for p in (e.name, e.category, "、".join(e.aliases), e.definition) if p)
        self.fused_score = e.score


def _norm(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    return [1.0 if hi == lo else (v - lo) / (hi - lo) for v in values]


def _keys(cands, gold: set[str]) -> list[str]:
    out: list[str] = []
    for c in cands:
        key = c.title if c.title in gold else (c.document_id or c.id)
        if key not in out:
            out.append(key)
    return out


def _rank(keys: list[str], gold: set[str]) -> int | None:
    return next((i + 1 for i, k in enumerate(keys) if k in gold), None)


async def run(args: argparse.Namespace) -> dict:
    addresses = MeshAddresses()
    for a in (addresses.gateway_addr, addresses.reranker_addr):
        if not a.startswith(("127.", "localhost", "[::1]")):
            raise SystemExit(f"refusing {a}: loopback only")
    dataset = load_dataset(Path(args.dataset))
    if args.limit and args.limit < len(dataset):
        dataset = random.Random(args.seed).sample(dataset, args.limit)
    ns = [int(x) for x in args.top_n.split(",")]
    alphas = [float(x) for x in args.alpha.split(",")]
    ranks: dict[str, list[int | None]] = {}
    latency: dict[int, list[float]] = {n: [] for n in ns}
    scorer = ""
    truncated = 0
    slots = asyncio.Semaphore(args.concurrency)
    async with grpc.aio.insecure_channel(addresses.gateway_addr) as gch, grpc.aio.insecure_channel(addresses.reranker_addr) as rch:
        gateway = gateway_pb2_grpc.GatewayServiceStub(gch)
        reranker = reranker_pb2_grpc.RerankerServiceStub(rch)

        async def one(row: dict) -> None:
            nonlocal scorer, truncated
            gold = {str(g) for g in row.get("gold", [])}
            async with slots:
                if args.entities:
                    reply = await gateway.SearchEntities(gateway_pb2.SearchEntitiesRequest(query=row["query"], top_k=max(ns)), timeout=120)
                    cands = [_Card(e) for e in reply.entities]
                else:
                    reply = await gateway.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=max(ns), rerank=False), timeout=120)
                    cands = list(reply.results)
                ranks.setdefault("fused", []).append(_rank(_keys(cands, gold), gold))
                if not cands:
                    for n in ns:
                        for a in alphas:
                            ranks.setdefault(f"top{n}/alpha{a}", []).append(None)
                    return
                fused = _norm([c.fused_score for c in cands])
                for n in ns:
                    head = cands[:n]
                    started = time.perf_counter()
                    rr = await reranker.Rerank(reranker_pb2.RerankRequest(query=row["query"], passages=[
                        reranker_pb2.Passage(id=str(i), text=(f"{' '.join(c.heading_path)}\n{c.text}" if c.heading_path else c.text)) for i, c in enumerate(head)
                    ]), timeout=300)
                    latency[n].append((time.perf_counter() - started) * 1000)
                    scorer, truncated = rr.scorer, truncated + rr.truncated_passages
                    by_id = {s.id: s.score for s in rr.scores}
                    model = _norm([by_id[str(i)] for i in range(len(head))])
                    for a in alphas:
                        blended = [a * m + (1 - a) * f for m, f in zip(model, fused[: len(head)])]
                        order = [head[i] for i in sorted(range(len(head)), key=lambda i: -blended[i])] + cands[n:]
                        ranks.setdefault(f"top{n}/alpha{a}", []).append(_rank(_keys(order, gold), gold))

        await asyncio.gather(*(one(r) for r in dataset))

    def summary(rs: list[int | None]) -> dict:
        return {"mrr@10": round(sum(1 / r for r in rs if r and r <= 10) / len(rs), 4),
                "recall@1": round(sum(1 for r in rs if r == 1) / len(rs), 4),
                "recall@10": round(sum(1 for r in rs if r and r <= 10) / len(rs), 4), "n": len(rs)}

    return {"dataset": args.dataset, "entities": args.entities, "limit": args.limit, "scorer": scorer, "truncated_passages": truncated,
            "orders": {k: summary(v) for k, v in ranks.items()},
            "rerank_latency_ms": {str(n): percentiles(v) for n, v in latency.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--top-n", default="20,50")
    ap.add_argument("--alpha", default="0.3,0.5,0.7,1")
    ap.add_argument("--limit", type=int, default=0, help="fixed-seed sample of this many queries (0 = all)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--entities", action="store_true", help="SearchEntities instead of Search")
    args = ap.parse_args()
    save("rerank_quality", asyncio.run(run(args)))


if __name__ == "__main__":
    main()
