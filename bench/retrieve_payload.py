"""Bytes and time of retriever_pg's Retrieve with and without the stored
chunk embeddings in the candidates (RetrieveRequest.with_embeddings), on
the first 40 scenario dev questions, against a running stack (`graphmesh
up`; the mesh token from .graphmesh/secrets). Runs alternate, so the two
arms see the same machine load.

    python bench/retrieve_payload.py
"""
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]
from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc  # noqa: E402
from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc  # noqa: E402
from services.common.mesh_auth import MESH_TOKEN_METADATA  # noqa: E402
async def main():
    token = (REPO / ".graphmesh" / "secrets" / "mesh-token").read_text().strip()
    md = ((MESH_TOKEN_METADATA, token),)
    path = REPO.parent / "shared" / "data" / "law-zh" / "queries-scenario-dev.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:40]
    async with grpc.aio.insecure_channel("127.0.0.1:50052") as e, grpc.aio.insecure_channel("127.0.0.1:50053") as r:
        ex=expander_pb2_grpc.ExpanderServiceStub(e); rs=retriever_pb2_grpc.RetrieverServiceStub(r)
        reqs=[]
        for row in rows:
            x=await ex.Expand(expander_pb2.ExpandRequest(query=row["query"], embed=True), timeout=30, metadata=md)
            reqs.append((row["query"], list(x.keywords), list(x.embedding)))
        for flag in (True, False, True, False):
            sizes=[]; times=[]
            for q,kw,emb in reqs:
                t=time.perf_counter()
                rep=await rs.Retrieve(retriever_pb2.RetrieveRequest(query=q, keywords=kw, query_embedding=emb, top_k=20, with_embeddings=flag), timeout=30, metadata=md)
                times.append((time.perf_counter()-t)*1000); sizes.append(rep.ByteSize())
            print(f"with_embeddings={flag}: response {statistics.mean(sizes)/1024:.1f} KiB, p50 {statistics.median(times):.1f} ms")
asyncio.run(main())
