"""Probe (not a test): does HippoRAG 2's passage-phrase PageRank over a
general phrase graph (services/retriever_graph/phrase_graph.py) improve on
GraphMesh's own ranking? Runs over the stored chunks of a running stack.

For each collection: every stored chunk's key phrases (jieba TF-IDF nouns)
make a bipartite chunk-phrase graph (edge weight: the phrase's weight in the
chunk); optional synonym edges join phrases whose e5 vectors have cosine >=
``--synonym-threshold`` (HippoRAG 2: 0.8, top 2047 neighbours; here the top
``--synonym-k``). For each question, personalised PageRank (damping 0.5)
restarts at the question's phrases (1 / passages holding each) and at
GraphMesh's Search results (``--passage-weight`` x min-max score), as HippoRAG
2 does; chunks are ranked by their PageRank mass. Orders compared with
GraphMesh's: PageRank alone, and RRF of the two (k 60).

Sets: ``docs`` (the design documents, gold given as text, ranks over chunks;
needs them ingested into ``--docs-collection``, e.g. ``graphmesh ingest files
tests/quality/data/docs --collection designdocs``) and the law dev sets
(ranks over documents; the law corpus in the default collection).

    graphmesh up   # the stack with the collections in
    python bench/phrase_graph_probe.py [--sets docs,scenario,consult,facts] [--passage-weight 0.05]
                                       [--synonym-threshold 0 (off)] [--depth 50]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import SHARED_DATA, first_gold_rank, save, stack_dsn  # noqa: E402

import asyncpg  # noqa: E402
import numpy as np  # noqa: E402
from scipy import sparse  # noqa: E402

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc  # noqa: E402
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.evaluate import gold_passages, load_dataset, passage_matches  # noqa: E402
from services.cli.significance import RANK_METRICS, compare_ranks, pooled, rank_metric  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.retriever_graph.phrase_graph import chunk_phrases, phrase_reset, query_phrases  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "tests" / "quality" / "data" / "queries-docs-dev.jsonl"
RRF_K = 60


async def load_chunks(dsn: str, collection: str) -> list[dict]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT c.id, c.document_id, c.heading_path, c.text FROM chunks c "
                                "JOIN documents d ON d.id = c.document_id WHERE d.collection = $1 ORDER BY c.id", collection)
    finally:
        await conn.close()
    return [dict(r) for r in rows]


class PhraseGraph:
    """The bipartite chunk-phrase graph of one collection as a sparse
    transition matrix, for whole-graph PageRank."""

    def __init__(self, chunks: list[dict], synonyms: list[tuple[str, str, float]] = ()):
        self.chunk_ids = [c["id"] for c in chunks]
        self.doc_of = {c["id"]: c["document_id"] for c in chunks}
        self.text_of = {c["id"]: c["text"] for c in chunks}
        per_chunk = [chunk_phrases(" ".join(c["heading_path"] or []) + " " + c["text"]) for c in chunks]
        self.phrases = sorted({p for ps in per_chunk for p, _ in ps})
        self.counts = {p: 0 for p in self.phrases}
        for ps in per_chunk:
            for p, _ in ps:
                self.counts[p] += 1
        self.index = {f"c:{c}": i for i, c in enumerate(self.chunk_ids)}
        for p in self.phrases:
            self.index[f"p:{p}"] = len(self.index)
        rows, cols, weights = [], [], []
        for cid, ps in zip(self.chunk_ids, per_chunk):
            for p, w in ps:
                a, b = self.index[f"c:{cid}"], self.index[f"p:{p}"]
                rows += [a, b]
                cols += [b, a]
                weights += [w, w]
        for a, b, w in synonyms:
            i, j = self.index.get(f"p:{a}"), self.index.get(f"p:{b}")
            if i is not None and j is not None and i != j:
                rows += [i, j]
                cols += [j, i]
                weights += [w, w]
        n = len(self.index)
        adjacency = sparse.csr_matrix((weights, (rows, cols)), shape=(n, n))
        strength = np.asarray(adjacency.sum(axis=1)).ravel()
        self.dangling = strength == 0
        inverse = np.where(strength > 0, 1.0 / np.maximum(strength, 1e-12), 0.0)
        self.transition = (sparse.diags(inverse) @ adjacency).T.tocsr()  # column-stochastic: moved = T @ scores
        self.n = n

    def pagerank(self, reset: dict[str, float], damping: float = 0.5, iterations: int = 50) -> np.ndarray:
        p = np.zeros(self.n)
        for node, w in reset.items():
            if node in self.index:
                p[self.index[node]] += w
        if p.sum() <= 0:
            return p
        p /= p.sum()
        scores = p.copy()
        for _ in range(iterations):
            new = (1 - damping) * p + damping * (self.transition @ scores + scores[self.dangling].sum() * p)
            if np.abs(new - scores).sum() < 1e-9:
                scores = new
                break
            scores = new
        return scores[: len(self.chunk_ids)]


async def embed(address: str, texts: list[str]) -> np.ndarray:
    out = []
    async with channel(address) as ch:
        stub = expander_pb2_grpc.ExpanderServiceStub(ch)
        for i in range(0, len(texts), 256):
            reply = await stub.Embed(expander_pb2.EmbedRequest(texts=texts[i:i + 256], kind=expander_pb2.EMBED_KIND_QUERY), timeout=600)
            out.extend(np.array(v.values, dtype=np.float32) for v in reply.vectors)
    return np.stack(out) if out else np.zeros((0, 384), dtype=np.float32)


def synonym_edges(phrases: list[str], vectors: np.ndarray, threshold: float, k: int) -> list[tuple[str, str, float]]:
    """Edges between each phrase and its ``k`` nearest phrases with cosine >= ``threshold``."""
    edges = []
    for start in range(0, len(phrases), 1024):
        sims = vectors[start:start + 1024] @ vectors.T
        for row, i in enumerate(range(start, min(start + 1024, len(phrases)))):
            sims[row, i] = -1
            top = np.argpartition(-sims[row], min(k, len(phrases) - 1))[:k]
            edges.extend((phrases[i], phrases[j], float(sims[row, j])) for j in top if sims[row, j] >= threshold and i < j)
    return edges


async def search(address: str, query: str, collection: str, depth: int) -> list[tuple[str, str, float, str]]:
    async with channel(address) as ch:
        reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Search(
            gateway_pb2.SearchRequest(query=query, top_k=depth, collections=[collection] if collection else []), timeout=120)
    return [(r.id, r.document_id, r.fused_score, r.text) for r in reply.results]


def rrf(*orders: list[str], k: int = RRF_K) -> list[str]:
    fused: dict[str, float] = {}
    for order in orders:
        for rank, item in enumerate(order, 1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return [i for i, _ in sorted(fused.items(), key=lambda kv: -kv[1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="docs,scenario,consult,facts")
    parser.add_argument("--docs-collection", default="designdocs")
    parser.add_argument("--depth", type=int, default=50, help="GraphMesh results seeding PageRank")
    parser.add_argument("--passage-weight", default="0.05", help="comma-separated values to try")
    parser.add_argument("--synonym-threshold", type=float, default=0.0, help="0: no synonym edges")
    parser.add_argument("--synonym-k", type=int, default=5)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--dsn", default="")
    args = parser.parse_args()
    use_local_mesh_token()
    addresses = MeshAddresses()
    dsn = stack_dsn(args.dsn)
    weights = [float(w) for w in args.passage_weight.split(",")]
    systems = ["graphmesh"] + [f"{kind}@{w}" for w in weights for kind in ("ppr", "rrf")]
    ranks: dict[str, dict[str, dict[str, int | None]]] = {s: {} for s in systems}
    graphs: dict[str, PhraseGraph] = {}
    for name in args.sets.split(","):
        collection = args.docs_collection if name == "docs" else "default"
        if collection not in graphs:
            t0 = time.perf_counter()
            chunks = asyncio.run(load_chunks(dsn, collection))
            synonyms = []
            if args.synonym_threshold > 0:
                plain = PhraseGraph(chunks)
                vecs = asyncio.run(embed(addresses.expander_addr, plain.phrases))
                synonyms = synonym_edges(plain.phrases, vecs, args.synonym_threshold, args.synonym_k)
            graphs[collection] = PhraseGraph(chunks, synonyms)
            g = graphs[collection]
            print(f"{collection}: {len(g.chunk_ids)} chunks, {len(g.phrases)} phrases, {len(synonyms)} synonym edges, "
                  f"built in {time.perf_counter() - t0:.1f} s", flush=True)
        g = graphs[collection]
        path = DOCS if name == "docs" else SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl"
        dataset = load_dataset(path, args.limit or None)
        for s in systems:
            ranks[s][name] = {}
        ppr_ms = []
        for row in dataset:
            qid = str(row["id"])
            hits = asyncio.run(search(addresses.gateway_addr, row["query"], collection if name == "docs" else "", args.depth))
            passages = gold_passages(row)
            if passages:
                gold = {cid for cid, text in g.text_of.items() if any(passage_matches(p, text) for p in passages)}
                key = lambda c: c  # noqa: E731 (ranks count chunks)
            else:
                gold = set(map(str, row["gold"]))
                key = lambda c, g=g: g.doc_of.get(c, c)  # noqa: E731 (ranks count documents)
            gm_order = [h[0] for h in hits]
            ranks["graphmesh"][name][qid] = first_gold_rank([key(c) for c in gm_order], gold)
            phrases = query_phrases(row["query"], g.counts)
            for w in weights:
                t0 = time.perf_counter()
                reset = phrase_reset(phrases, g.counts, {h[0]: h[2] for h in hits}, w)
                scores = g.pagerank(reset)
                top = np.argsort(-scores)[:100]
                ppr_order = [g.chunk_ids[i] for i in top if scores[i] > 0]
                ppr_ms.append((time.perf_counter() - t0) * 1000)
                ranks[f"ppr@{w}"][name][qid] = first_gold_rank([key(c) for c in ppr_order], gold)
                ranks[f"rrf@{w}"][name][qid] = first_gold_rank([key(c) for c in rrf(gm_order, ppr_order)], gold)
        print(f"{name}: {len(dataset)} questions, whole-graph PageRank p50 {np.median(ppr_ms):.1f} ms", flush=True)

    report: dict = {"args": vars(args), "sets": {}}
    for name in [*args.sets.split(","), "pooled"]:
        per = {s: (pooled(ranks[s]) if name == "pooled" else ranks[s][name]) for s in systems}
        entry = {s: {m: round(float(np.mean([rank_metric(m, r) for r in per[s].values()])), 4) for m in RANK_METRICS} for s in systems}
        entry["minus_graphmesh"] = {s: {m: d.as_dict() for m, d in compare_ranks(per["graphmesh"], per[s]).items()} for s in systems[1:]}
        report["sets"][name] = entry
        print(f"\n== {name} (n={len(per['graphmesh'])}): R@1 / R@10 / MRR@10")
        for s in systems:
            line = f"  {s:12s} " + " / ".join(f"{entry[s][m]:.3f}" for m in RANK_METRICS)
            if s != "graphmesh":
                d = entry["minus_graphmesh"][s]["mrr@10"]
                line += f"   MRR@10 {d['delta']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
            print(line)
    path = save("phrase_graph_probe", report)


if __name__ == "__main__":
    main()
