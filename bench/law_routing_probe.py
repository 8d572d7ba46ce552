"""Probe of law-level routing for lay questions (issue 23 item 3), against a
running stack (`graphmesh up`, the law corpus in the default collection):
for each dev question, Search top 30; the law with the most rank mass
(sum of 1/rank over the top 10's titles) is searched again inside that law
(metadata filter law = ...), and the two lists are merged by RRF (k 60 or
10; the in-law list at weight 1 or 0.5). Prints each variant's paired
bootstrap delta against the plain search (services/cli/significance.py)
and its R@1 / R@10 / MRR@10.

    python bench/law_routing_probe.py consult,scenario
"""
import asyncio
import json
import sys
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from graphmesh.common.v1 import types_pb2  # noqa: E402
from services.cli.significance import compare_ranks  # noqa: E402

SETS = sys.argv[1].split(",")
async def main():
    out = {}
    async with grpc.aio.insecure_channel("127.0.0.1:50051") as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for s in SETS:
            rows = [json.loads(line) for line in open(REPO.parent / "shared" / "data" / "law-zh" / f"queries-{s}-dev.jsonl")]
            for row in rows:
                gold = {str(g) for g in row["gold"]}
                r1 = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=30), timeout=60)
                base = [c.document_id for c in r1.results]
                mass = {}
                for i, c in enumerate(r1.results[:10]):
                    mass[c.title] = mass.get(c.title, 0.0) + 1.0 / (i + 1)
                laws = sorted(mass, key=lambda k: -mass[k])[:1]
                variants = {"base": base}
                for L in laws:
                    r2 = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=30,
                        filters=[types_pb2.MetadataFilter(key="law", equals=L)]), timeout=60)
                    inlaw = [c.document_id for c in r2.results]
                for name, k, w in (("rrf60", 60, 1.0), ("rrf60w05", 60, 0.5), ("rrf10", 10, 1.0)):
                    score = {}
                    for i, d in enumerate(base): score[d] = score.get(d, 0) + 1 / (k + i + 1)
                    for i, d in enumerate(inlaw): score[d] = score.get(d, 0) + w / (k + i + 1)
                    variants[name] = sorted(score, key=lambda d: -score[d])
                for name, lst in variants.items():
                    rank = next((i + 1 for i, d in enumerate(lst) if d in gold), None)
                    out.setdefault(name, {})[f"{s}:{row['id']}"] = rank
    base = out["base"]
    for name in out:
        if name == "base": continue
        d = compare_ranks(base, out[name])
        print(name, {m: f"{v.delta:+.3f} [{v.low:+.3f}, {v.high:+.3f}]" for m, v in d.items()})
    for name, ranks in out.items():
        n = len(ranks); r1 = sum(r == 1 for r in ranks.values()) / n; r10 = sum(bool(r and r <= 10) for r in ranks.values()) / n
        mrr = sum(1 / r for r in ranks.values() if r and r <= 10) / n
        print(f"{name}: R@1 {r1:.3f} R@10 {r10:.3f} MRR@10 {mrr:.3f} n={n}")
asyncio.run(main())
