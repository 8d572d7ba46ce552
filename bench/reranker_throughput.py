"""Reranker throughput benchmark (not a test): pairs/s of the cross-encoder
behind the real RerankerService (grpc.aio on a loopback port), against the
batch size (max_batch_pairs) and the number of concurrent Rerank calls.

    python bench/reranker_throughput.py --model DIR [--corpus FILE.jsonl[.gz]]
        [--batch-pairs 1,8,32,64] [--concurrency 1,4,8] [--passages 20]
        [--requests 16] [--max-length 256] [--max-wait-ms 5] [--device auto]
        [--runtimes torch,onnx]

``--runtimes`` names what runs the model: "torch" (sentence-transformers)
and/or "onnx" (ONNX Runtime over DIR/onnx/, `graphmesh reranker
export-onnx DIR`); with both, each cell runs both in turn, so the two are
compared under the same load on the machine.

Each cell starts a fresh service with that batch size (token budget =
batch size x max_length), warms it with one call, then sends ``requests``
Rerank calls of ``passages`` passages from ``concurrency`` closed-loop
workers (bounded in count; loopback only). Prints and saves pairs/s, call
latency p50/p95 and the mean batch actually formed (from
graphmesh_reranker_batch_size).
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import percentiles, save  # noqa: E402

import grpc  # noqa: E402
from prometheus_client import REGISTRY  # noqa: E402

from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc  # noqa: E402
from services.common.server import create_server  # noqa: E402
from services.reranker.config import RerankerSettings  # noqa: E402
from services.reranker.cross_encoder import CrossEncoderScorer  # noqa: E402
from services.reranker.onnx_cross_encoder import OnnxCrossEncoderScorer  # noqa: E402
from services.reranker.server import build  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def load_passages(path: Path, n: int, seed: int = 7) -> list[str]:
    """``n`` "heading\\ntext" passages sampled from a documents JSONL."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    rng = random.Random(seed)
    out = []
    for r in rng.sample(records, min(n, len(records))):
        heading = " ".join(str(r[k]) for k in ("law", "chapter", "article", "title") if r.get(k))
        out.append(f"{heading}\n{r['text'][:512]}")
    return out


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def cell(scorer, batch_pairs: int, concurrency: int, requests: int, passages: list[str],
               queries: list[str], per_request: int, max_length: int, max_wait_ms: float) -> dict:
    settings = RerankerSettings(port=0, max_batch_pairs=batch_pairs, max_batch_tokens=batch_pairs * max_length,
                                max_length=max_length, max_wait_ms=max_wait_ms, queue_size=max(4096, requests * per_request))
    service, _ = await build(settings, scorer=scorer)
    server, port, _ = await create_server(service, "127.0.0.1", 0)
    rng = random.Random(batch_pairs * 1000 + concurrency)

    def req() -> reranker_pb2.RerankRequest:
        return reranker_pb2.RerankRequest(query=rng.choice(queries), passages=[
            reranker_pb2.Passage(id=str(i), text=t) for i, t in enumerate(rng.sample(passages, per_request))])

    latencies: list[float] = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = reranker_pb2_grpc.RerankerServiceStub(ch)
            await stub.Rerank(req(), timeout=600)  # warm-up (model load on the first cell)
            batches0, pairs0 = sample("graphmesh_reranker_batch_size_count"), sample("graphmesh_reranker_batch_size_sum")
            left = requests

            async def worker() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    started = time.perf_counter()
                    await stub.Rerank(req(), timeout=600)
                    latencies.append((time.perf_counter() - started) * 1000)

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            wall = time.perf_counter() - started
    finally:
        await server.stop(0)
        await service.on_stop()  # stops the batcher; the scorer keeps its model for the next cell
    batches = sample("graphmesh_reranker_batch_size_count") - batches0
    pairs = sample("graphmesh_reranker_batch_size_sum") - pairs0
    return {"batch_pairs": batch_pairs, "concurrency": concurrency, "requests": len(latencies),
            "pairs_per_s": round(pairs / wall, 1), "mean_batch": round(pairs / batches, 1) if batches else 0,
            "latency_ms": percentiles(latencies)}


async def main_async(args: argparse.Namespace) -> dict:
    passages = load_passages(Path(args.corpus), 400)
    queries = [p.split("\n", 1)[1][:60] for p in load_passages(Path(args.corpus), 50, seed=11)]
    scorers = {}
    for runtime in args.runtimes.split(","):
        if runtime == "onnx":
            scorers[runtime] = OnnxCrossEncoderScorer(args.model, args.max_length, forward_batch=args.forward_batch)
        else:
            scorers[runtime] = CrossEncoderScorer(args.model, args.device, args.max_length, forward_batch=args.forward_batch)
        await asyncio.to_thread(scorers[runtime].load)
    rows = []
    for b in [int(x) for x in args.batch_pairs.split(",")]:
        for c in [int(x) for x in args.concurrency.split(",")]:
            for runtime, scorer in scorers.items():
                row = {"runtime": runtime, **await cell(scorer, b, c, args.requests, passages, queries, args.passages,
                                                        args.max_length, args.max_wait_ms)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    return {"model": args.model, "devices": {r: s.device for r, s in scorers.items()}, "forward_batch": args.forward_batch,
            "max_length": args.max_length, "passages_per_request": args.passages, "max_wait_ms": args.max_wait_ms, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="CrossEncoder directory")
    ap.add_argument("--corpus", default=str(REPO / "tests" / "data" / "law_sample.jsonl"))
    ap.add_argument("--batch-pairs", default="1,8,32,64")
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--passages", type=int, default=20, help="passages per Rerank call")
    ap.add_argument("--requests", type=int, default=16, help="Rerank calls per cell")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--max-wait-ms", type=float, default=5.0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--runtimes", default="torch", help="comma-separated: torch, onnx")
    ap.add_argument("--forward-batch", type=int, default=0, help="pairs per forward pass (0 = auto)")
    args = ap.parse_args()
    save("reranker_throughput", asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
