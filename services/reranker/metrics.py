"""Prometheus metrics of the reranker's dynamic batching.

pairs/s is ``rate(graphmesh_reranker_pairs_total[1m])``.
"""
from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

QUEUE_SECONDS = Histogram(
    "graphmesh_reranker_queue_seconds", "Time a pair waited in the batching queue (seconds).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
BATCH_SIZE = Histogram(
    "graphmesh_reranker_batch_size", "Pairs per scored batch.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
)
BATCH_TOKENS = Histogram(
    "graphmesh_reranker_batch_tokens", "Tokens per scored batch, counted padded (longest pair x pairs).",
    buckets=(64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536),
)
PAIRS = Counter("graphmesh_reranker_pairs_total", "(query, passage) pairs scored.")
QUEUE_DEPTH = Gauge("graphmesh_reranker_queue_depth", "Pairs waiting in the batching queue.")
INFLIGHT = Gauge("graphmesh_reranker_inflight_requests", "Rerank calls being served.")
TRUNCATED = Counter("graphmesh_reranker_truncated_total", "Passages cut to fit the scorer's window.")
