"""Ingestion benchmark (not a test): articles/s and chunks/s of a JSONL
corpus through the running gateway's Ingest RPC (parse, content-hash check,
embed, write to PostgreSQL and Neo4j), with the time of each stage.

    python bench/ingestion.py [--file CORPUS.jsonl.gz] [--batch 256]

For the fresh-store figure run it against an empty stack (a new
GRAPHMESH_HOME); against a stack that already holds the corpus it measures
the idempotent path (every article "unchanged"), and says so. Embeddings come
from ~/.cache/graphmesh/embeddings.sqlite when cached (said in the output as
"embedding_cache": the cache file's size before the run).

Triples (medkg-zh triples.jsonl.gz): GraphMesh has no triple/entity ingestion
path on this branch, so triples/s is reported as not measured.
"""
from __future__ import annotations

import argparse
import gzip
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import LAW_CORPUS, save  # noqa: E402

import grpc  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.expander.config import ExpanderSettings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(LAW_CORPUS))
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    path = Path(args.file)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        lines = [line.rstrip(b"\n") for line in f if line.strip()]
    cache = Path(ExpanderSettings().embedding.cache)
    totals = defaultdict(int)
    stages: dict[str, float] = defaultdict(float)
    started = time.perf_counter()
    with grpc.insecure_channel(MeshAddresses().gateway_addr, options=[("grpc.max_send_message_length", 64 << 20)]) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for start in range(0, len(lines), args.batch):
            reply = stub.Ingest(gateway_pb2.IngestRequest(domain_pack="law_zh", jsonl=b"\n".join(lines[start : start + args.batch])), timeout=1800)
            for key in ("received", "stored", "unchanged", "chunks"):
                totals[key] += getattr(reply, key)
            totals["failed"] += len(reply.failures)
            for t in reply.timings:
                stages[t.stage] += t.duration_ms / 1000
    wall = time.perf_counter() - started
    figures = {
        "file": path.name, "batch": args.batch, **totals, "wall_s": round(wall, 1),
        "articles_per_s": round(totals["received"] / wall, 1),
        "stored_articles_per_s": round(totals["stored"] / wall, 1),
        "chunks_per_s": round(totals["chunks"] / wall, 1),
        "stage_seconds": {k: round(v, 1) for k, v in stages.items()},
        "embedding_cache": {"path": str(cache), "bytes_before": cache.stat().st_size if cache.exists() else 0},
        "mode": "fresh store" if totals["stored"] >= 0.9 * totals["received"] else "idempotent re-ingest (articles unchanged)",
        "triples_per_s": "not measured: no triple ingestion path in GraphMesh on this branch",
    }
    save("ingestion", figures)


if __name__ == "__main__":
    main()
