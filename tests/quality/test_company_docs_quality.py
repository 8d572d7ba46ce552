"""Quality gate, abstention on a user's own documents: a small company's
seven documents (tests/quality/data/company_docs: .docx, .pdf, .md, .txt)
ingested as files into a collection without a domain pack, never used to fit
anything. Answer (extractive, no LLM) must answer the questions they answer
and abstain on those they do not: the 14 workplace questions of
out_of_scope.jsonl and every fifth general question of
bench/data/out_of_domain_zh.jsonl. The rule is the generic pack's
(domains/generic/recipes.json; docs/benchmarks.md "Abstention on collections
without a pack"); the extractive answers of the answerable questions must
also quote their answering line. Floors in tests/quality/floors.py
("company_docs")."""
from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import load_dataset, run_queries
from tests.quality.floors import FLOORS
from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, patient_gateway

pytestmark = [pytest.mark.quality, pytest.mark.asyncio(loop_scope="session")]
REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data" / "company_docs"
COLLECTION = "companydocs"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def company_gateway(mesh):
    async with patient_gateway(mesh) as address:
        files = [gateway_pb2.IngestFile(name=f"company/{p.name}", content=p.read_bytes())
                 for p in sorted(DATA.iterdir()) if p.suffix in (".txt", ".md", ".pdf", ".docx") and p.name != "README.md"]
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
            reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Ingest(
                gateway_pb2.IngestRequest(files=files, collection=COLLECTION), timeout=PATIENT_SECONDS)
        assert len(files) == 7 and [f.status for f in reply.files] == [gateway_pb2.FILE_STATUS_STORED] * 7, reply.files
        yield address


async def _answers(address: str, mesh, rows: list[dict]) -> list:
    answered = await run_queries(address, rows, 10, concurrency=4, timeout=PATIENT_SECONDS, answers=True,
                                 judge_address=mesh.addresses["judge"], collections=(COLLECTION,))
    assert not [r.error for r in answered if r.error]
    return answered


async def _abstained(address: str, mesh, rows: list[dict]) -> list[bool]:
    return [r.answer_mode == "abstained" for r in await _answers(address, mesh, rows)]


async def test_own_documents_answer_what_they_hold_and_abstain_on_what_they_do_not(company_gateway, mesh):
    floors = FLOORS["company_docs"]
    replies = await _answers(company_gateway, mesh, load_dataset(DATA / "queries.jsonl"))
    answerable = [r.answer_mode == "abstained" for r in replies]
    workplace = await _abstained(company_gateway, mesh, load_dataset(DATA / "out_of_scope.jsonl"))
    general = await _abstained(company_gateway, mesh, load_dataset(REPO / "bench" / "data" / "out_of_domain_zh.jsonl")[::5])
    rates = {"answered": 1 - sum(answerable) / len(answerable), "workplace_abstained": sum(workplace) / len(workplace),
             "general_abstained": sum(general) / len(general),
             "quotes_gold": sum(bool(r.answer_quotes_gold) for r in replies) / len(replies)}
    print(f"company documents: {len(answerable)} answerable, {len(workplace)} workplace and {len(general)} general "
          f"out-of-scope questions: " + ", ".join(f"{k} {v:.4f} (floor {floors[k]})" for k, v in rates.items()))
    assert all(rates[k] >= floors[k] for k in floors), (rates, floors)
