"""One million chunks in pgvector through GraphMesh's own store (issue 27
item 5; a benchmark, not a test).

Three steps, in a separate database "gm_bench_million" of the PostgreSQL
that `graphmesh up` started (or --dsn):

    python bench/scale_million.py load [--n 1000000]   # writes, then builds the HNSW index
    python bench/scale_million.py search               # latency and recall@10, unfiltered and filtered
    python bench/scale_million.py drop

Data. Vectors: every distinct e5onnx vector this machine holds (the law
chunks stored by `make demo` and the embedding cache's passages, sentences
and questions, about 120k), then mixtures of two of them, normalize(a x_i +
(1 - a) x_j) with a uniform in [0.55, 0.9], up to ``--n``: the derived
vectors lie among real ones rather than in synthetic clusters. Texts: the
sentences of the law corpus in turn (``text.split_sentences``), ten chunks a
document, titled by the article's law. Collections: 1% of the documents in
"slice1", 10% in "slice10", the rest in "default", for filtered searches.

``load`` writes through ``PgStore.ingest_documents`` inside one
``bulk_load`` (the product's path for a large corpus: keyword postings,
trigram index, no HNSW index until the end), timing each slab of 100k
chunks so a rate that falls with size shows, then the HNSW build on exit,
sampling the PostgreSQL processes' resident memory meanwhile. It then adds
5,000 more chunks with the index live (incremental inserts) and times them.

``search`` embeds 200 law dev questions (100 scenario, 100 consult) with
e5onnx and runs ``PgStore.vector_search`` (the retriever's SQL: HNSW,
ef_search 64, iterative scan) for top_k 10: p50 / p95 and recall@10
against an exact top 10 by cosine (numpy over the stored vectors), here
and on the stack's own 26k-chunk database with the same questions; then
the filtered searches (collections slice1 and slice10, top_k 20): how many
of the 20 are filled and recall@10 within the slice.
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import logging
import os
import random
import sqlite3
import threading
import time
from pathlib import Path

import sys

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED_DATA, fetch_rows, percentiles, save, stack_dsn  # noqa: E402

import asyncpg  # noqa: E402
import numpy as np  # noqa: E402

from scale import dsn_with_database  # noqa: E402

DB = "gm_bench_million"
DIM = 384
CHUNKS_PER_DOC = 10
SLAB = 100_000
WORK = Path(os.environ.get("GM_BENCH_MILLION_DIR", "/tmp/gm_bench_million"))


async def real_vectors(stack: str) -> np.ndarray:
    """Distinct unit e5onnx vectors: the stack's stored chunks and the local
    embedding cache (n x 384, float32)."""
    rows: list[np.ndarray] = [(await stored_matrix(stack))[1]]
    cache = Path.home() / ".cache/graphmesh/embeddings.sqlite"
    if cache.exists():
        with sqlite3.connect(cache) as db:
            rows += [np.frombuffer(blob, dtype=np.float32)[None, :] for (blob,) in db.execute("SELECT vector FROM vectors")
                     if len(blob) == DIM * 4]
    x = np.concatenate(rows)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    _, keep = np.unique(np.round(x, 5), axis=0, return_index=True)
    return x[np.sort(keep)]


def all_vectors(real: np.ndarray, n: int, seed: int = 7) -> np.ndarray:
    """``real`` then mixtures of two real rows up to ``n`` rows."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, DIM), dtype=np.float32)
    k = min(n, len(real))
    out[:k] = real[:k]
    for start in range(k, n, 100_000):
        size = min(100_000, n - start)
        i, j = rng.integers(0, len(real), size), rng.integers(0, len(real), size)
        a = rng.uniform(0.55, 0.9, size).astype(np.float32)[:, None]
        mix = a * real[i] + (1 - a) * real[j]
        out[start:start + size] = mix / np.linalg.norm(mix, axis=1, keepdims=True)
    return out


def corpus_sentences() -> list[tuple[str, str]]:
    """(law, sentence) for every sentence of the law corpus, in corpus order."""
    from services.common.text import split_sentences

    out: list[tuple[str, str]] = []
    with gzip.open(SHARED_DATA / "law-zh" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            out.extend((r["law"], s) for s in split_sentences(r["text"]) if len(s) >= 8)
    return out


def collection_of(doc: int) -> str:
    """1% of documents in slice1, the next 9% in slice10 (which also takes slice1's
    share in its figures: see search), the rest in default."""
    bucket = int(hashlib.sha256(str(doc).encode()).hexdigest(), 16) % 100
    return "slice1" if bucket == 0 else "slice10" if bucket < 10 else "default"


def documents(first_chunk: int, count: int, vectors: np.ndarray | None, sentences: list[tuple[str, str]], offset: int = 0):
    """DocumentRecords for chunks first_chunk .. first_chunk + count - 1
    (``count`` a multiple of CHUNKS_PER_DOC); chunk c gets vectors[c - offset]
    (no embedding when ``vectors`` is None)."""
    from services.common.records import ChunkRecord, DocumentRecord
    from services.common.text import document_terms

    docs = []
    for d in range(first_chunk // CHUNKS_PER_DOC, (first_chunk + count) // CHUNKS_PER_DOC):
        law = sentences[(d * CHUNKS_PER_DOC) % len(sentences)][0]
        doc_id = f"m{d}"
        chunks = []
        for o in range(CHUNKS_PER_DOC):
            c = d * CHUNKS_PER_DOC + o
            text = sentences[c % len(sentences)][1]
            chunks.append(ChunkRecord(id=f"{doc_id}#{o}", document_id=doc_id, ordinal=o, heading_path=[law], text=text,
                                      embedding=[] if vectors is None else vectors[c - offset].tolist(), terms=document_terms(law + " " + text)))
        docs.append(DocumentRecord(id=doc_id, title=law, heading_path=[law], metadata={},
                                   content_hash=hashlib.sha256(doc_id.encode()).hexdigest(), chunks=chunks,
                                   collection=collection_of(d), domain_pack="generic"))
    return docs


class _Collect(logging.Handler):
    """Keeps the store's log lines (the build's time and memory, and pgvector's
    warning when the graph outgrows maintenance_work_mem)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")
        print(self.lines[-1], flush=True)


class MemorySampler:
    """Peak summed resident memory (MiB) of the processes named postgres,
    sampled every ``every`` seconds in a thread."""

    def __init__(self, every: float = 1.0) -> None:
        self.peak_mib = 0.0
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        if f.read().strip() != "postgres":
                            continue
                    with open(f"/proc/{pid}/status") as f:
                        total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
                except (OSError, StopIteration):
                    continue
            self.peak_mib = max(self.peak_mib, total / 1024)
            self._stop.wait(self._every)

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


async def load(admin: str, n: int, build_mem_max_mb: int) -> dict:
    from services.retriever_pg.store import PgStore, index_build_mem_mb

    started = time.perf_counter()
    real = await real_vectors(admin)
    vectors = all_vectors(real, n)
    sentences = corpus_sentences()
    WORK.mkdir(parents=True, exist_ok=True)
    np.save(WORK / "vectors.npy", vectors)
    figures: dict = {"n": n, "dim": DIM, "real_vectors": int(min(n, len(real))), "sentences": len(sentences),
                     "prepare_s": round(time.perf_counter() - started, 1),
                     "index_build_mem_mb": index_build_mem_mb(n, DIM, build_mem_max_mb), "slabs": []}
    print(json.dumps(figures), flush=True)

    conn = await asyncpg.connect(admin)
    await conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    await conn.execute(f'CREATE DATABASE "{DB}"')
    await conn.close()
    store = PgStore(dsn_with_database(admin, DB), DIM, pool_max=4, index_build_mem_max_mb=build_mem_max_mb)
    store_log = logging.getLogger("services.retriever_pg.store")
    store_log.setLevel(logging.INFO)
    messages = _Collect()
    store_log.addHandler(messages)
    await store.open()
    try:
        await store.migrate()
        with MemorySampler() as memory:
            async with store.bulk_load():
                for first in range(0, n, SLAB):
                    count = min(SLAB, n - first)
                    t0 = time.perf_counter()
                    docs = documents(first, count, vectors, sentences)
                    t1 = time.perf_counter()
                    result = await store.ingest_documents(docs)
                    t2 = time.perf_counter()
                    slab = {"chunks": f"{first}-{first + count}", "prepare_s": round(t1 - t0, 1), "write_s": round(t2 - t1, 1),
                            "chunks_per_s": round(count / (t2 - t1)), "stored_docs": result.stored,
                            "failures": len(result.failures)}
                    figures["slabs"].append(slab)
                    print(json.dumps(slab), flush=True)
                build_started = time.perf_counter()
            figures["hnsw_build_s"] = round(time.perf_counter() - build_started, 1)
        figures["postgres_peak_rss_mib"] = round(memory.peak_mib)
        figures["store_log"] = list(messages.lines)
        async with store._conn() as c:
            figures["sizes_mib"] = {name: round(await c.fetchval("SELECT pg_total_relation_size($1::regclass)", name) / 2**20)
                                    for name in ("chunks", "chunk_terms", "documents", "chunks_embedding_hnsw_idx")}
        print(json.dumps({"hnsw_build_s": figures["hnsw_build_s"], "peak_rss_mib": figures["postgres_peak_rss_mib"],
                          "sizes_mib": figures["sizes_mib"]}), flush=True)

        # 5,000 more chunks with the index live: the rate a user adding documents sees at this size.
        extra = np.asarray(all_vectors(real, len(real) + 5000, seed=11)[len(real):])
        docs = documents(n, 5000, extra, sentences, offset=n)
        t0 = time.perf_counter()
        await store.ingest_documents(docs)
        figures["incremental_5000_chunks_per_s"] = round(5000 / (time.perf_counter() - t0))
        print(json.dumps({"incremental_5000_chunks_per_s": figures["incremental_5000_chunks_per_s"]}), flush=True)
        np.save(WORK / "vectors_extra.npy", extra)
    finally:
        await store.close()
    figures["total_s"] = round(time.perf_counter() - started, 1)
    save("scale_million_load", figures)
    return figures


def dev_questions(per_set: int = 100, seed: int = 5) -> list[str]:
    out: list[str] = []
    for name in ("scenario", "consult"):
        with open(SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl", encoding="utf-8") as f:
            rows = [json.loads(line)["query"] for line in f if line.strip()]
        out += random.Random(seed).sample(rows, per_set)
    return out


async def stored_matrix(dsn: str) -> tuple[list[str], np.ndarray, list[str]]:
    """(chunk ids, unit vectors, collection of each) of a database's chunks."""
    rows = await fetch_rows(dsn, "SELECT c.id, c.embedding::text AS e, d.collection FROM chunks c JOIN documents d "
                                 "ON d.id = c.document_id WHERE c.embedding IS NOT NULL")
    x = np.asarray([json.loads(r["e"]) for r in rows], dtype=np.float32)
    return [r["id"] for r in rows], x / np.linalg.norm(x, axis=1, keepdims=True), [r["collection"] for r in rows]


async def timed_searches(dsn: str, queries: np.ndarray, top_k: int, collections: list[str] | None = None,
                         passes: int = 1, ef_search: int = 64) -> tuple[list[list[str]], list[float]]:
    """(hits of the last pass, its latencies in ms): ``passes`` passes over
    ``queries`` through PgStore.vector_search; a later pass finds the pages
    the earlier ones read in PostgreSQL's shared buffers."""
    from services.retriever_pg.store import PgStore

    store = PgStore(dsn, DIM, pool_max=2, ef_search=ef_search)
    await store.open()
    try:
        for q in queries[:5]:  # warm the pool
            await store.vector_search(q.tolist(), top_k, collections, with_embeddings=False)
        for _ in range(passes):
            found, lat = [], []
            for q in queries:
                t0 = time.perf_counter()
                hits = await store.vector_search(q.tolist(), top_k, collections, with_embeddings=False)
                lat.append((time.perf_counter() - t0) * 1000)
                found.append([h.chunk_id for h in hits])
    finally:
        await store.close()
    return found, lat


def exact_ids(ids: list[str], matrix: np.ndarray, queries: np.ndarray, k: int = 10, mask: np.ndarray | None = None) -> list[list[str]]:
    out = []
    for q in queries:
        sims = matrix @ q
        if mask is not None:
            sims = np.where(mask, sims, -np.inf)
        top = np.argpartition(-sims, k)[:k]
        out.append([ids[i] for i in top[np.argsort(-sims[top])]])
    return out


def recall_at_10(found: list[list[str]], truth: list[list[str]]) -> float:
    return round(float(np.mean([len(set(f[:10]) & set(t[:10])) / 10 for f, t in zip(found, truth)])), 4)


def search(admin: str, passes: int = 1, ef_search: int = 64) -> dict:
    from services.expander.embedding import build_embedder

    embedder = build_embedder("e5onnx", threads=2)
    questions = dev_questions()
    queries = np.asarray(embedder.embed(questions, query=True), dtype=np.float32)
    figures: dict = {"questions": len(questions), "ef_search": ef_search, "passes": passes}
    for name, dsn in (("stack_26k", admin), ("million", dsn_with_database(admin, DB))):
        ids, matrix, colls = asyncio.run(stored_matrix(dsn))
        found, lat = asyncio.run(timed_searches(dsn, queries, 10, passes=passes, ef_search=ef_search))
        run = {"chunks": len(ids), "top10_ms": percentiles(lat), "recall@10": recall_at_10(found, exact_ids(ids, matrix, queries))}
        if name == "million":
            colls_arr = np.asarray(colls)
            for scope in (["slice1"], ["slice10", "slice1"]):
                mask = np.isin(colls_arr, scope)
                found, lat = asyncio.run(timed_searches(dsn, queries, 20, scope, passes=passes, ef_search=ef_search))
                run["+".join(scope)] = {"chunks_in_scope": int(mask.sum()), "top20_ms": percentiles(lat),
                                        "filled_20_of_20": sum(len(f) == 20 for f in found),
                                        "recall@10": recall_at_10(found, exact_ids(ids, matrix, queries, mask=mask))}
        figures[name] = run
        print(name, json.dumps(run), flush=True)
        del matrix
    figures["p50_ratio_million_to_26k"] = round(figures["million"]["top10_ms"]["p50"] / figures["stack_26k"]["top10_ms"]["p50"], 2)
    save("scale_million_search", figures)
    return figures


async def rebuild(admin: str, mem_mb: int) -> dict:
    """Drops and rebuilds the million's HNSW index with the product's SQL at
    a fixed maintenance_work_mem (``mem_mb``): the build time of the store's
    old fixed 512 MB against the sized build of ``load``, same data."""
    from services.retriever_pg.store import _HNSW_INDEX, _HNSW_INDEX_SQL

    conn = await asyncpg.connect(dsn_with_database(admin, DB))
    notices: list[str] = []
    conn.add_log_listener(lambda _c, m: notices.append(m.message))
    try:
        await conn.execute(f"DROP INDEX IF EXISTS {_HNSW_INDEX}")
        await conn.execute(f"SET maintenance_work_mem = '{mem_mb}MB'")
        t0 = time.perf_counter()
        await conn.execute(_HNSW_INDEX_SQL)
        figures = {"maintenance_work_mem_mb": mem_mb, "hnsw_build_s": round(time.perf_counter() - t0, 1), "notices": notices}
    finally:
        await conn.close()
    print(json.dumps(figures, ensure_ascii=False), flush=True)
    save("scale_million_rebuild", figures)
    return figures


def graph(stack_uri: str, stack_password: str, n: int, deadline_s: float) -> dict:
    """The document graph at scale: a throwaway embedded Neo4j (the stack's
    launcher, 1 GB heap) loaded through ``GraphStore.ingest_documents`` in
    slabs of 100k chunks until ``n`` chunks or ``deadline_s`` seconds, then
    ``GraphStore.retrieve`` (graph.heading, graph.fulltext, graph.neighbour)
    for the 200 questions here and on the stack's law graph."""
    import shutil
    import socket

    from services.common.text import query_keywords
    from services.retriever_graph.embedded import start_embedded_neo4j, stop_process
    from services.retriever_graph.store import GraphStore

    home = WORK / "neo4j"
    shutil.rmtree(home, ignore_errors=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc, _ = start_embedded_neo4j(home, port, WORK / "neo4j.log")
    sentences = corpus_sentences()
    questions = dev_questions()
    figures: dict = {"target_chunks": n, "deadline_s": deadline_s, "slabs": []}

    async def searches(store: GraphStore, collections: tuple[str, ...]) -> dict:
        for q in questions[:5]:
            await store.retrieve(q, query_keywords(q), 10, collections=collections)
        lat, empty = [], 0
        for q in questions:
            t0 = time.perf_counter()
            hits = await store.retrieve(q, query_keywords(q), 10, collections=collections)
            lat.append((time.perf_counter() - t0) * 1000)
            empty += not hits
        return {"retrieve_top10_ms": percentiles(lat), "questions_without_hits": empty}

    async def run() -> None:
        started = time.perf_counter()
        store = GraphStore(f"bolt://127.0.0.1:{port}")
        await store.open()
        try:
            await store.migrate()
            for first in range(0, n, SLAB):
                if time.perf_counter() - started > deadline_s:
                    break
                docs = documents(first, min(SLAB, n - first), None, sentences)
                t0 = time.perf_counter()
                result = await store.ingest_documents(docs)
                slab = {"chunks": f"{first}-{first + min(SLAB, n - first)}", "write_s": round(time.perf_counter() - t0, 1),
                        "chunks_per_s": round(min(SLAB, n - first) / (time.perf_counter() - t0)), "stored_docs": result.stored,
                        "failures": len(result.failures)}
                figures["slabs"].append(slab)
                print(json.dumps(slab), flush=True)
            figures["chunks_loaded"] = sum(int(s["chunks"].split("-")[1]) - int(s["chunks"].split("-")[0]) for s in figures["slabs"])
            figures["scaled"] = await searches(store, ("default", "slice1", "slice10"))
            print("scaled", json.dumps(figures["scaled"]), flush=True)
        finally:
            await store.close()
        stack = GraphStore(stack_uri, "neo4j", stack_password)
        await stack.open()
        try:
            figures["stack_law_graph"] = await searches(stack, ("default",))
            print("stack", json.dumps(figures["stack_law_graph"]), flush=True)
        finally:
            await stack.close()

    try:
        asyncio.run(run())
    finally:
        stop_process(proc.pid)
        figures["store_size_mib"] = round(sum(f.stat().st_size for f in home.rglob("*") if f.is_file()) / 2**20)
        shutil.rmtree(home, ignore_errors=True)
    save("scale_million_graph", figures)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("load", "search", "rebuild", "graph", "drop"))
    parser.add_argument("--ef-search", type=int, default=64, help="search: the store's ef_search (its default: 64)")
    parser.add_argument("--passes", type=int, default=1, help="search: passes over the questions; the last is timed")
    parser.add_argument("--mem-mb", type=int, default=512, help="rebuild: maintenance_work_mem, MiB")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--deadline", type=float, default=1800, help="graph: stop loading after this many seconds")
    parser.add_argument("--neo4j-uri", default="bolt://127.0.0.1:7687", help="graph: the stack's Neo4j, for the 26k baseline")
    parser.add_argument("--neo4j-password-file", default=".graphmesh/secrets/neo4j-password")
    parser.add_argument("--dsn", default="", help="admin DSN of a PostgreSQL with pgvector (default: graphmesh up's)")
    parser.add_argument("--index-build-mem-max-mb", type=int, default=4096,
                        help="the store's cap on the HNSW build's maintenance_work_mem (its default: 4096)")
    args = parser.parse_args()
    admin = stack_dsn(args.dsn) if args.command != "graph" else ""
    if args.command == "load":
        asyncio.run(load(admin, args.n, args.index_build_mem_max_mb))
    elif args.command == "search":
        search(admin, args.passes, args.ef_search)
    elif args.command == "rebuild":
        asyncio.run(rebuild(admin, args.mem_mb))
    elif args.command == "graph":
        graph(args.neo4j_uri, Path(args.neo4j_password_file).read_text().strip(), args.n, args.deadline)
    else:
        async def drop() -> None:
            conn = await asyncpg.connect(admin)
            await conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
            await conn.close()
        asyncio.run(drop())


if __name__ == "__main__":
    main()
