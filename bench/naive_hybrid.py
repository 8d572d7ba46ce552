"""The naive hybrid baseline beside GraphMesh (not a test), on every law dev
set and pooled, with paired bootstrap intervals.

The baseline is what a user could build in an afternoon over GraphMesh's
own stored data: jieba cut_for_search tokens + BM25 (bm25s) over each
chunk's heading path and text, exact dot product over the chunk vectors
stored in PostgreSQL (the same e5onnx embeddings), RRF (k=60) over the top
100 of each, chunks folded to their document. Query vectors come from the
running expander's Embed RPC (query side), so both systems see the same
vectors. GraphMesh is the running gateway's Search with its defaults.

For each set: R@1 / R@10 / MRR@10 of both, and GraphMesh minus naive with a
95% paired bootstrap interval and a permutation p-value
(services/cli/significance.py); then the same over all sets pooled. Also
BM25 alone and dense alone, so the single channels are on the table too.

    graphmesh up   # with the law corpus in (make demo --keep-up, or graphmesh ingest)
    python bench/naive_hybrid.py [--sets scenario,consult,facts] [--limit N] [--concurrency 4]

Needs the `bench` extra (bm25s).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import SHARED_DATA, fetch_rows, first_gold_rank, save, stack_dsn  # noqa: E402

import bm25s  # noqa: E402
import jieba  # noqa: E402
import numpy as np  # noqa: E402

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc  # noqa: E402
from services.cli.evaluate import load_dataset, run_queries  # noqa: E402
from services.cli.significance import RANK_METRICS, compare_ranks, pooled, rank_metric  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402

RRF_K = 60
DEPTH = 100


def tokens(text: str) -> list[str]:
    """jieba search-mode tokens, without whitespace or punctuation-only ones."""
    return [t for t in jieba.cut_for_search(text) if t.strip() and any(ch.isalnum() for ch in t)]


async def load_chunks(dsn: str) -> tuple[list[str], list[str], np.ndarray]:
    """(document id per chunk, chunk text for BM25, unit vectors) of every stored chunk."""
    rows = await fetch_rows(dsn, "SELECT document_id, heading_path, text, embedding::text AS v FROM chunks "
                                 "WHERE embedding IS NOT NULL ORDER BY id")
    docs = [r["document_id"] for r in rows]
    texts = [" ".join(r["heading_path"] or []) + " " + r["text"] for r in rows]
    vectors = np.stack([np.array(json.loads(r["v"]), dtype=np.float32) for r in rows])
    return docs, texts, vectors


async def query_vectors(address: str, queries: list[str]) -> np.ndarray:
    """The expander's query-side embeddings of ``queries`` (64 a call)."""
    out = []
    async with channel(address) as ch:
        stub = expander_pb2_grpc.ExpanderServiceStub(ch)
        for i in range(0, len(queries), 64):
            reply = await stub.Embed(expander_pb2.EmbedRequest(texts=queries[i:i + 64], kind=expander_pb2.EMBED_KIND_QUERY),
                                     timeout=300)
            out.extend(np.array(v.values, dtype=np.float32) for v in reply.vectors)
    return np.stack(out)


#: 1-based rank of the first gold document among distinct documents (top 10).
first_gold = first_gold_rank


def fold(order: np.ndarray, docs: list[str]) -> list[str]:
    return [docs[i] for i in order]


def rrf(*orders: np.ndarray) -> list[int]:
    """Indices fused by reciprocal rank (k = RRF_K), best first."""
    fused: dict[int, float] = {}
    for order in orders:
        for rank, idx in enumerate(order, 1):
            fused[int(idx)] = fused.get(int(idx), 0.0) + 1.0 / (RRF_K + rank)
    return [i for i, _ in sorted(fused.items(), key=lambda kv: -kv[1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="scenario,consult,facts")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--dsn", default="", help="PostgreSQL DSN (default: the local stack's embedded one)")
    args = parser.parse_args()
    use_local_mesh_token()
    addresses = MeshAddresses()
    dsn = stack_dsn(args.dsn)
    started = time.perf_counter()
    docs, texts, vectors = asyncio.run(load_chunks(dsn))
    print(f"{len(docs)} chunks loaded in {time.perf_counter() - started:.1f} s", flush=True)
    started = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index([tokens(t) for t in texts], show_progress=False)
    print(f"BM25 index in {time.perf_counter() - started:.1f} s", flush=True)

    systems = ("graphmesh", "naive_hybrid", "bm25", "dense")
    ranks: dict[str, dict[str, dict[str, int | None]]] = {s: {} for s in systems}
    per_query_ms: dict[str, list[float]] = {"naive_hybrid": []}
    for name in args.sets.split(","):
        dataset = load_dataset(SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl", args.limit or None)
        queries = [q["query"] for q in dataset]
        golds = [set(map(str, q["gold"])) for q in dataset]
        ids = [str(q["id"]) for q in dataset]
        qvecs = asyncio.run(query_vectors(addresses.expander_addr, queries))
        for s in systems:
            ranks[s][name] = {}
        for qid, query, gold, qvec in zip(ids, queries, golds, qvecs):
            t0 = time.perf_counter()
            scores = retriever.get_scores(tokens(query))
            bm25_top = np.argsort(-scores)[:DEPTH]
            dense_top = np.argsort(-(vectors @ qvec))[:DEPTH]
            hybrid = [docs[i] for i in rrf(bm25_top, dense_top)]
            per_query_ms["naive_hybrid"].append((time.perf_counter() - t0) * 1000)
            ranks["naive_hybrid"][name][qid] = first_gold(hybrid, gold)
            ranks["bm25"][name][qid] = first_gold(fold(bm25_top, docs), gold)
            ranks["dense"][name][qid] = first_gold(fold(dense_top, docs), gold)
        rows = asyncio.run(run_queries(addresses.gateway_addr, dataset, 10, args.concurrency, 120.0))
        ranks["graphmesh"][name] = {str(r.id): r.first_gold_rank for r in rows}
        errors = sum(1 for r in rows if r.error)
        print(f"{name}: {len(dataset)} questions, GraphMesh errors {errors}", flush=True)

    report: dict = {"sets": {}, "pooled": {}, "naive_hybrid_ms_per_query": float(np.median(per_query_ms["naive_hybrid"])),
                    "ranks": ranks}  # first gold rank per system, set and question: for paired comparisons of two runs
    sets = {**{n: None for n in args.sets.split(",")}, "pooled": None}
    for name in sets:
        per_system = {s: (pooled(ranks[s]) if name == "pooled" else ranks[s][name]) for s in systems}
        entry = {s: {m: round(float(np.mean([rank_metric(m, r) for r in per_system[s].values()])), 4) for m in RANK_METRICS}
                 for s in systems}
        entry["n"] = len(per_system["graphmesh"])
        entry["graphmesh_minus"] = {other: {m: d.as_dict() for m, d in compare_ranks(per_system[other], per_system["graphmesh"]).items()}
                                    for other in systems[1:]}
        (report["pooled"] if name == "pooled" else report["sets"].setdefault(name, {})).update(entry)
        print(f"\n== {name} (n={entry['n']}): R@1 / R@10 / MRR@10")
        for s in systems:
            print(f"  {s:13s} " + " / ".join(f"{entry[s][m]:.3f}" for m in RANK_METRICS))
        for other in systems[1:]:
            for m in RANK_METRICS:
                d = entry["graphmesh_minus"][other][m]
                print(f"  graphmesh - {other:12s} {m:9s} {d['delta']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] p={d['p_value']:.3f}"
                      f"{'  *' if d['significant'] else ''}")
    print(f"\nnaive hybrid: median {report['naive_hybrid_ms_per_query']:.1f} ms per query (one core, query embedding excluded)")
    save("naive_hybrid", report)


if __name__ == "__main__":
    main()
