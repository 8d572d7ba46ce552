"""Retrieval-quality gate, law passages: fixed samples of the three law-zh
dev sets searched through the gateway (Search, default settings) over a
fixed sub-corpus ingested through the gateway (cold embedding cache, USE);
recall@10 and MRR@10 must stay at or above tests/quality/floors.py.

The sub-corpus holds every gold article of the sampled queries, the other
articles of their laws (capped per law) and background articles of other
laws (tests/quality/samples.py); docs/retrieval.md ("Quality gate") shows
that its figures track the full-corpus ones."""
from __future__ import annotations

import time

import grpc
import pytest
import pytest_asyncio

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import run_queries
from services.gateway.config import GatewaySettings
from tests.quality import samples
from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, check_floors, patient_gateway, require_shared_data, score

pytestmark = [pytest.mark.quality, pytest.mark.asyncio(loop_scope="session")]

#: Documents per Ingest call; small, so each store call stays short (see
#: gate.EMBED_BATCH).
BATCH = 128
#: Results asked per query (as `graphmesh eval`); ranks count distinct articles.
TOP_K = 30


@pytest.fixture(scope="module")
def law_data() -> dict:
    """{"samples": {name: Sample}, "corpus": [article records]}."""
    require_shared_data()
    started = time.perf_counter()
    limit = GatewaySettings().max_query_chars
    drawn = {name: samples.law_sample(name, limit) for name in samples.LAW_SAMPLE}
    corpus = samples.law_subcorpus(list(drawn.values()))
    print(f"\nlaw samples and sub-corpus built in {time.perf_counter() - started:.1f}s")
    return {"samples": drawn, "corpus": corpus}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def law_gateway(law_data, mesh):
    """Address of a patient gateway over the mesh (gate.patient_gateway),
    once the sub-corpus is ingested through it."""
    corpus = law_data["corpus"]
    async with patient_gateway(mesh) as address:
        started, cpu = time.perf_counter(), time.process_time()
        stored = 0
        stages: dict[str, float] = {}
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            for i in range(0, len(corpus), BATCH):
                reply = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=samples.jsonl(corpus[i:i + BATCH]), domain_pack="law_zh"), timeout=900)
                assert not reply.failures, reply.failures[:3]
                stored += reply.stored
                for t in reply.timings:
                    stages[t.stage] = stages.get(t.stage, 0.0) + t.duration_ms / 1000
        assert stored == len(corpus)
        print(f"\nlaw sub-corpus: {len(corpus)} articles of {len({a['law'] for a in corpus})} laws ingested in "
              f"{time.perf_counter() - started:.1f}s, {time.process_time() - cpu:.1f} CPU-s in this process ("
              + ", ".join(f"{k} {v:.1f}s" for k, v in stages.items()) + ")")
        yield address


@pytest.mark.parametrize("name", list(samples.LAW_SAMPLE))
async def test_law_dev_sample_stays_above_its_floors(law_data, law_gateway, name):
    sample = law_data["samples"][name]
    assert sample.rows, f"{name}: empty sample"
    started, cpu = time.perf_counter(), time.process_time()
    rows = await run_queries(law_gateway, sample.rows, TOP_K, concurrency=4, timeout=PATIENT_SECONDS)
    note = f" ({sample.left_out} over {sample.max_chars} chars left out)" if sample.left_out else ""
    note += f" [{time.perf_counter() - started:.0f}s, {time.process_time() - cpu:.0f} CPU-s]"
    check_floors(score(name, rows), note)
