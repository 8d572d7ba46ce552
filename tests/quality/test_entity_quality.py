"""Retrieval-quality gate, entities: fixed samples of the medkg-zh alias and
symptom dev sets searched through the gateway (SearchEntities, default
settings) in a fixed sub-library ingested through the gateway (Ingest,
INGEST_KIND_ENTITIES then INGEST_KIND_TRIPLES); top-1, recall@10 and MRR@10
must stay at or above tests/quality/floors.py.

The sub-library (tests/quality/samples.py) holds the gold entities, for the
alias queries the entities sharing the most character bigrams with the
query and with the gold name, and for the symptom queries the entities
linked to most of the query's symptoms, with every triple of the latter."""
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

#: Records per Ingest call: far fewer than the CLI's 5,000 / 50,000, so each
#: call from the gateway to a store stays short on a loaded machine (see
#: gate.EMBED_BATCH).
ENTITY_BATCH = 1000
TRIPLE_BATCH = 5000
TOP_K = 10


@pytest.fixture(scope="module")
def entity_data() -> dict:
    """{"samples": {name: Sample}, "entities": [...], "triples": [...]}."""
    require_shared_data()
    started = time.perf_counter()
    limit = GatewaySettings().max_query_chars
    drawn = {name: samples.entity_sample(name, limit) for name in samples.ENTITY_SAMPLE}
    symptom_entities, triples = samples.symptom_library(drawn["symptom"])
    names = {e["name"] for e in symptom_entities}
    entities = symptom_entities + [e for e in samples.alias_library(drawn["alias"]) if e["name"] not in names]
    print(f"\nmedkg samples and sub-library built in {time.perf_counter() - started:.1f}s")
    return {"samples": drawn, "entities": entities, "triples": triples}


async def _ingest(stub, records: list[dict], kind: int, batch: int) -> int:
    stored = 0
    for i in range(0, len(records), batch):
        reply = await stub.Ingest(gateway_pb2.IngestRequest(jsonl=samples.jsonl(records[i:i + batch]), kind=kind), timeout=900)
        assert not reply.failures, reply.failures[:3]
        stored += reply.stored
    return stored


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def entity_gateway(entity_data, mesh):
    """Address of a patient gateway over the mesh (gate.patient_gateway),
    once the sub-library is ingested through it."""
    entities, triples = entity_data["entities"], entity_data["triples"]
    # Grouped by predicate, as `graphmesh ingest triples` sends them.
    triples = sorted(triples, key=lambda t: t["predicate"])
    async with patient_gateway(mesh) as address:
        started, cpu = time.perf_counter(), time.process_time()
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            assert await _ingest(stub, entities, gateway_pb2.INGEST_KIND_ENTITIES, ENTITY_BATCH) == len(entities)
            assert await _ingest(stub, triples, gateway_pb2.INGEST_KIND_TRIPLES, TRIPLE_BATCH) == len(triples)
        print(f"\nmedkg sub-library: {len(entities)} entities, {len(triples)} triples ingested in "
              f"{time.perf_counter() - started:.1f}s, {time.process_time() - cpu:.1f} CPU-s in this process")
        yield address


@pytest.mark.parametrize("name", list(samples.ENTITY_SAMPLE))
async def test_entity_dev_sample_stays_above_its_floors(entity_data, entity_gateway, name):
    sample = entity_data["samples"][name]
    assert sample.rows, f"{name}: empty sample"
    started, cpu = time.perf_counter(), time.process_time()
    rows = await run_queries(entity_gateway, sample.rows, TOP_K, concurrency=4, timeout=PATIENT_SECONDS, entities=True)
    check_floors(score(name, rows), f" [{time.perf_counter() - started:.0f}s, {time.process_time() - cpu:.0f} CPU-s]")
