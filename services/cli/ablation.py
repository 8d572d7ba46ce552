"""``graphmesh eval --ablate``: the same queries with one stage switched off
at a time, as a markdown table, so each stage's contribution is measured."""
from __future__ import annotations

import asyncio

from services.cli.evaluate import run_queries, summarise
from services.common import names

_DEFAULT_ON = (names.PG_VECTOR, names.PG_KEYWORD, names.PG_FULLTEXT, names.PG_TRIGRAM,
               names.GRAPH_HEADING, names.GRAPH_FULLTEXT, names.GRAPH_NEIGHBOUR)
_LABELS = {
    names.PG_VECTOR: "dense", names.PG_KEYWORD: "BM25", names.PG_FULLTEXT: "hit count, then length",
    names.PG_TRIGRAM: "short queries", names.GRAPH_HEADING: "heading lookup", names.GRAPH_FULLTEXT: "Neo4j full text",
    names.GRAPH_NEIGHBOUR: "reading-order neighbours",
}
# (label, stages switched off; a switched-off channel is not run). The first
# row is the full pipeline.
ABLATIONS: list[tuple[str, tuple[str, ...]]] = [
    ("full pipeline", ()),
    *((f"- {c} ({_LABELS[c]})", (c,)) for c in _DEFAULT_ON),
    ("- graph (whole retriever)", ("graph",)),
    ("only pg.keyword (BM25)", tuple(c for c in names.PG_CHANNELS if c != names.PG_KEYWORD) + ("graph",)),
    ("only pg.vector (dense)", tuple(c for c in names.PG_CHANNELS if c != names.PG_VECTOR) + ("graph",)),
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
