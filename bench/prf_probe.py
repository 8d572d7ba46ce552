"""Probe of pseudo-relevance feedback for lay questions (issue 23 item 3),
against a running stack (`graphmesh up`, the law corpus in the default
collection): each dev question's top 3 results give 5 keywords (jieba's
TF-IDF tags, not already in the question), appended to the question for a
second search; that list alone, or merged with the first by RRF (k 60, the
second at weight 1 or 0.5), against the plain search, with paired bootstrap
intervals (services/cli/significance.py).

    python bench/prf_probe.py
"""
import asyncio
import json
import sys
from pathlib import Path

import grpc
import jieba.analyse

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.significance import compare_ranks  # noqa: E402
async def main():
    out = {}
    async with grpc.aio.insecure_channel("127.0.0.1:50051") as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for s in ("consult", "scenario"):
            rows = [json.loads(line) for line in open(REPO.parent / "shared" / "data" / "law-zh" / f"queries-{s}-dev.jsonl")]
            for row in rows:
                gold = {str(g) for g in row["gold"]}
                r1 = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=30), timeout=60)
                base = [c.document_id for c in r1.results]
                fb = " ".join(c.text for c in r1.results[:3])
                tags = [t for t in jieba.analyse.extract_tags(fb, topK=8) if t not in row["query"]][:5]
                r2 = await stub.Search(gateway_pb2.SearchRequest(query=row["query"] + " " + " ".join(tags), top_k=30), timeout=60)
                prf = [c.document_id for c in r2.results]
                variants = {"base": base, "prf_only": prf}
                for name, w in (("rrf", 1.0), ("rrf05", 0.5)):
                    sc = {}
                    for i, d in enumerate(base): sc[d] = sc.get(d, 0) + 1 / (60 + i + 1)
                    for i, d in enumerate(prf): sc[d] = sc.get(d, 0) + w / (60 + i + 1)
                    variants[name] = sorted(sc, key=lambda d: -sc[d])
                for name, lst in variants.items():
                    out.setdefault(name, {}).setdefault(s, {})[str(row["id"])] = next((i + 1 for i, d in enumerate(lst) if d in gold), None)
    for s in ("consult", "scenario"):
        for name in ("prf_only", "rrf", "rrf05"):
            d = compare_ranks(out["base"][s], out[name][s])
            print(s, name, {m: f"{v.delta:+.3f} [{v.low:+.3f}, {v.high:+.3f}]" for m, v in d.items()})
asyncio.run(main())
