"""What pg.centred costs a search where the collection mixes writing systems
(docs/benchmarks.md, "Dense scores centred by writing system"; not a test).

Each folder in FOLDERS (laid out like tests/quality/data/<set>: documents
beside queries.jsonl) is ingested as files into its own collection of the
quality gate's in-process mesh; then every question is searched (top_k 10)
with the channel on and off in turn (``disabled_stages: ["pg.centred"]``),
ROUNDS rounds after one warm-up round. Prints p50 / p95 of the stages the
channel touches (retrieve.pg.vector, sentence.maxsim, fuse) and of the whole
search, per arm: the two arms run in the same sitting, so only their
difference means anything on a shared machine.

    FOLDERS=/path/a_docs,tests/quality/data/kestrel_docs PYTHONPATH=.:gen/python \\
        python -m pytest bench/centred_dense_cost.py -q -s \\
        -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh
"""
from __future__ import annotations

import os
import statistics
from pathlib import Path

import grpc
import pytest

pytestmark = [pytest.mark.asyncio(loop_scope="session")]
ROUNDS = int(os.environ.get("ROUNDS", "2"))
STAGES = ("retrieve.pg.vector", "sentence.maxsim", "fuse", "total")
ARMS = (("on", []), ("off", ["pg.centred"]))


async def test_centred_dense_cost(mesh):
    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from services.cli.evaluate import load_dataset
    from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, patient_gateway

    durations: dict[tuple[str, str], list[float]] = {}
    async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            for folder in map(Path, filter(None, os.environ.get("FOLDERS", "").split(","))):
                collection = f"cost_{folder.name.removesuffix('_docs')}"
                files = [gateway_pb2.IngestFile(name=f"{collection}/{p.name}", content=p.read_bytes())
                         for p in sorted(folder.iterdir())
                         if p.suffix in (".txt", ".md", ".pdf", ".docx", ".html") and p.stem != "README"]
                await stub.Ingest(gateway_pb2.IngestRequest(files=files, collection=collection), timeout=1800)
                questions = load_dataset(folder / "queries.jsonl")
                for round_ in range(ROUNDS + 1):
                    for row in questions:
                        for arm, off in ARMS:
                            reply = await stub.Search(gateway_pb2.SearchRequest(
                                query=row["query"], top_k=10, collections=[collection], disabled_stages=off),
                                timeout=PATIENT_SECONDS)
                            if round_ == 0:
                                continue  # warm-up: caches of sentence vectors, postings and centroids
                            for t in reply.timings:
                                durations.setdefault((arm, t.stage), []).append(t.duration_ms)
    for stage in STAGES:
        for arm, _ in ARMS:
            values = sorted(durations.get((arm, stage), []))
            if values:
                p95 = values[int(0.95 * (len(values) - 1))]
                print(f"{stage:20s} {arm:3s} n={len(values):4d} p50 {statistics.median(values):6.2f} ms  p95 {p95:6.2f} ms")
