"""What fetching `sentence.maxsim`'s sentence vectors from the expander costs
when every one is cached there (not a test). For 40 scenario dev questions it
takes the top 20 chunks' sentence units (as the stage cuts them), asks the
running expander for them once to cache them, then times three rounds of the
same Embed calls, and the SQLite lookup alone in the expander's cache file.

    graphmesh up   (a corpus in)
    GRAPHMESH_HOME=<stack>/.graphmesh python bench/maxsim_embed_probe.py

Prints the Embed p50 (ms), texts per call and cache hit rate, then the
lookup p50 (ms). Reads ~/.cache/graphmesh/embeddings.sqlite, the default
GRAPHMESH_EXPANDER_EMBEDDING__CACHE.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import LAW_DEV  # noqa: E402

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc  # noqa: E402
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.gateway.search.sentence_maxsim import sentence_units  # noqa: E402

QUESTIONS = 40
CACHE = Path.home() / ".cache" / "graphmesh" / "embeddings.sqlite"


async def main() -> None:
    use_local_mesh_token()
    addresses = MeshAddresses()
    questions = [json.loads(line)["query"] for line in open(LAW_DEV, encoding="utf-8")][:QUESTIONS]
    async with channel(addresses.gateway_addr) as g, channel(addresses.expander_addr) as e:
        gateway, expander = gateway_pb2_grpc.GatewayServiceStub(g), expander_pb2_grpc.ExpanderServiceStub(e)
        batches = []
        for question in questions:
            reply = await gateway.Search(gateway_pb2.SearchRequest(query=question, top_k=20))
            batches.append([s for c in reply.results for s in sentence_units(c.text)][:256])
        requests = [expander_pb2.EmbedRequest(texts=b, kind=expander_pb2.EMBED_KIND_PASSAGE) for b in batches]
        for request in requests:
            await expander.Embed(request)
        times, hits, texts = [], 0, 0
        for _ in range(3):
            for request in requests:
                started = time.perf_counter()
                reply = await expander.Embed(request)
                times.append((time.perf_counter() - started) * 1000)
                hits, texts = hits + reply.cache_hits, texts + len(request.texts)
    print(f"Embed p50 {statistics.median(times):.2f} ms, {texts / len(times):.1f} texts a call, "
          f"hit rate {hits / texts:.3f}")
    db = sqlite3.connect(str(CACHE))
    lookups = []
    for batch in batches:
        started = time.perf_counter()
        keys = [hashlib.sha256(f"e5onnx\0p\0{text}".encode()).hexdigest() for text in batch]
        db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(keys))})", keys).fetchall()
        lookups.append((time.perf_counter() - started) * 1000)
    print(f"SQLite lookup p50 {statistics.median(lookups):.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
