"""``graphmesh eval --ablate``: the same queries with one stage switched off
at a time, as a markdown table, so each stage's contribution is measured."""
from __future__ import annotations

import asyncio

from services.cli.evaluate import run_queries, summarise

# (label, stages switched off). The first row is the full pipeline.
ABLATIONS: list[tuple[str, tuple[str, ...]]] = [
    ("full pipeline", ()),
    ("- pg.vector (dense)", ("pg.vector",)),
    ("- pg.keyword (BM25)", ("pg.keyword",)),
    ("- pg.fulltext (hit count, then length)", ("pg.fulltext",)),
    ("- pg.trigram (short queries)", ("pg.trigram",)),
    ("- graph.heading", ("graph.heading",)),
    ("- graph (whole retriever)", ("graph",)),
    ("only pg.keyword (BM25)", ("pg.vector", "pg.fulltext", "pg.trigram", "graph")),
    ("only pg.vector (dense)", ("pg.keyword", "pg.fulltext", "pg.trigram", "graph")),
]
COLUMNS = ["recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "latency_ms_p50", "latency_ms_p95"]


def ablation_table(address: str, dataset: list[dict], top_k: int, concurrency: int, timeout: float) -> str:
    """Runs every ablation and returns the markdown table."""
    # One untimed pass over a few queries so caches are warm for every row.
    asyncio.run(run_queries(address, dataset[:20], top_k, concurrency, timeout))
    lines = ["| configuration | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for label, disabled in ABLATIONS:
        rows = asyncio.run(run_queries(address, dataset, top_k, concurrency, timeout, disabled_stages=disabled))
        summary = summarise(rows)
        cells = [str(summary.get(c, "")) for c in COLUMNS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    return "\n".join(lines)
