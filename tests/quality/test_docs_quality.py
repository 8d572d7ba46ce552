"""Quality gate, a user's own documents: the three design documents
(tests/quality/data/docs) ingested as files into a generic collection
through the gateway, then the 79 questions of queries-docs-dev.jsonl asked
with Search and with Answer (extractive, no LLM). The gold is the answering
passage's text: a result matching it is gold (services.cli.evaluate
.passage_matches) and an answer quotes it when the passage is in it. Floors
in tests/quality/floors.py ("docs")."""
from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import load_dataset, run_queries
from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, check_floors, patient_gateway, score
from tests.quality.floors import FLOORS

pytestmark = [pytest.mark.quality, pytest.mark.asyncio(loop_scope="session")]
DATA = Path(__file__).resolve().parent / "data"
COLLECTION = "designdocs"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def docs_gateway(mesh):
    async with patient_gateway(mesh) as address:
        files = [gateway_pb2.IngestFile(name=f"docs/{p.name}", content=p.read_bytes()) for p in sorted((DATA / "docs").glob("*.txt"))]
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
            reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Ingest(
                gateway_pb2.IngestRequest(files=files, collection=COLLECTION), timeout=PATIENT_SECONDS)
        assert [f.status for f in reply.files] == [gateway_pb2.FILE_STATUS_STORED] * len(files), reply.files
        yield address


async def test_own_documents_the_answering_passage_ranks_and_is_quoted(docs_gateway, mesh):
    rows = load_dataset(DATA / "queries-docs-dev.jsonl")
    searched = await run_queries(docs_gateway, rows, 10, concurrency=4, timeout=PATIENT_SECONDS, collections=(COLLECTION,))
    check_floors(score("docs", searched))
    answered = await run_queries(docs_gateway, rows, 10, concurrency=4, timeout=PATIENT_SECONDS, answers=True,
                                 judge_address=mesh.addresses["judge"], collections=(COLLECTION,))
    assert not [r.error for r in answered if r.error]
    quoted = sum(bool(r.answer_quotes_gold) for r in answered) / len(answered)
    abstained = sum(r.answer_mode == "abstained" for r in answered)
    print(f"docs answers: quote the gold passage {quoted:.4f} (floor {FLOORS['docs_answers']['quotes_gold']}), "
          f"abstained {abstained} of {len(answered)}")
    assert quoted >= FLOORS["docs_answers"]["quotes_gold"]
