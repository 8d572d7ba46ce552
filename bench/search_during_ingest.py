"""Search while a corpus loads (a benchmark, not a test).

Against a running stack with an empty store and a cold embedding cache (a
fresh GRAPHMESH_HOME and GRAPHMESH_EXPANDER_EMBEDDING__CACHE), starts
``graphmesh ingest documents`` of ``--n`` law articles from ``--offset`` and,
while it runs, sends a Search request every ``--interval`` seconds, one at a
time (a question that takes longer delays the next; each question with a
fresh prefix so nothing is cached): the scenario and consult dev questions
in turn. Prints the searches' latency (p50/p95/max), their
sentence MaxSim stage, how many came back degraded, and the ingest's
articles/s: what a user asking during a load gets, and what the load pays
for it. Use a new ``--offset`` for each run so the cache stays cold::

    GRAPHMESH_HOME=/tmp/gm-ingest GRAPHMESH_EXPANDER_EMBEDDING__CACHE=/tmp/gm-ingest/cache.sqlite graphmesh up --detach
    python bench/search_during_ingest.py --n 2000 --offset 10000
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import itertools
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import LAW_CORPUS, LAW_DEV, percentiles, save  # noqa: E402

import grpc  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.evaluate import load_dataset  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402

CONSULT_DEV = LAW_DEV.parent / "queries-consult-dev.jsonl"


async def search_while(ingest: subprocess.Popen, queries: list[str], interval: float) -> dict:
    address = MeshAddresses().gateway_addr
    totals, maxsim, degraded, errors = [], [], 0, 0
    feed = itertools.cycle(queries)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = gateway_pb2_grpc.GatewayServiceStub(channel)
        while ingest.poll() is None:
            query = f"{uuid.uuid4().hex[:6]} {next(feed)}"
            started = time.perf_counter()
            try:
                reply = await stub.Search(gateway_pb2.SearchRequest(query=query, top_k=10), timeout=30)
            except grpc.aio.AioRpcError:
                errors += 1
                continue
            took = time.perf_counter() - started
            totals.append(took * 1000)
            maxsim += [t.duration_ms for t in reply.timings if t.stage == "sentence.maxsim"]
            degraded += bool(reply.degraded)
            await asyncio.sleep(max(0.0, interval - took))
    return {"searches": len(totals), "errors": errors, "degraded": degraded,
            "latency_ms": {**percentiles(totals), "max": round(max(totals, default=0), 1)},
            "sentence_maxsim_ms": {**percentiles(maxsim), "max": round(max(maxsim, default=0), 1)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="articles ingested")
    parser.add_argument("--offset", type=int, default=10000, help="first article of the corpus file")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds from one search's start to the next's")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    with gzip.open(LAW_CORPUS, "rt", encoding="utf-8") as f:
        lines = [line for line in itertools.islice(f, args.offset, args.offset + args.n) if line.strip()]
    queries = [r["query"] for path in (LAW_DEV, CONSULT_DEV) for r in load_dataset(path)]
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "articles.jsonl"
        docs.write_text("".join(lines), encoding="utf-8")
        started = time.perf_counter()
        ingest = subprocess.Popen([str(Path(sys.executable).parent / "graphmesh"), "ingest", "documents", str(docs),
                                   "--pack", "law_zh"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        searches = asyncio.run(search_while(ingest, queries, args.interval))
        seconds = time.perf_counter() - started
        out = ingest.stdout.read() if ingest.stdout else ""
    result = {"label": args.label, "articles": len(lines), "offset": args.offset, "ingest_s": round(seconds, 1),
              "articles_per_s": round(len(lines) / seconds, 1), "interval_s": args.interval, "ingest_rc": ingest.returncode,
              "ingest_reply": out.strip().splitlines()[-1] if out.strip() else "", **searches}
    print(json.dumps(result, ensure_ascii=False, indent=1))
    save("search_during_ingest", result)


if __name__ == "__main__":
    main()
