"""Quality gate, the generic path on documents nothing was fitted on: 15
laws written as plain-text files (tests/quality/law_files.py, GATE_LAWS)
ingested into a collection without a domain pack, then the scenario and
consult dev questions that cite them, asked with Search; gold = the cited
article's start, given as text. Floors in tests/quality/floors.py
("lawfiles_scenario", "lawfiles_consult")."""
from __future__ import annotations

import time

import grpc
import pytest
import pytest_asyncio

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import run_queries
from services.gateway.config import GatewaySettings
from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, check_floors, patient_gateway, require_shared_data, score
from tests.quality.law_files import GATE_LAWS, law_files

pytestmark = [pytest.mark.quality, pytest.mark.asyncio(loop_scope="session")]
COLLECTION = "lawfiles"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def law_files_gateway(mesh):
    """(gateway address, {set: questions}) once the files are ingested."""
    require_shared_data()
    files, questions = law_files(GATE_LAWS)
    limit = GatewaySettings().max_query_chars
    questions = {name: [q for q in rows if len(q["query"]) <= limit] for name, rows in questions.items()}
    async with patient_gateway(mesh) as address:
        started = time.perf_counter()
        upload = [gateway_pb2.IngestFile(name=f"laws/{name}", content=text.encode()) for name, text in files.items()]
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
            reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Ingest(
                gateway_pb2.IngestRequest(files=upload, collection=COLLECTION), timeout=900)
        assert [f.status for f in reply.files] == [gateway_pb2.FILE_STATUS_STORED] * len(upload), reply.files
        print(f"\n{len(upload)} law files, {reply.chunks} chunks ingested in {time.perf_counter() - started:.1f}s")
        yield address, questions


@pytest.mark.parametrize("name", ["scenario", "consult"])
async def test_laws_as_files_the_generic_path_ranks_the_cited_article(law_files_gateway, name):
    address, questions = law_files_gateway
    rows = await run_queries(address, questions[name], 10, concurrency=4, timeout=PATIENT_SECONDS,
                             collections=(COLLECTION,))
    check_floors(score(f"lawfiles_{name}", rows))
