"""Quality gate, answers over a user's own documents that nothing was fitted
on, ingested as files into a collection without a domain pack:

- company_docs: a small company's seven Chinese documents
  (tests/quality/data/company_docs: .docx, .pdf, .md, .txt), its 37
  questions, its 14 workplace out-of-scope questions and every fifth general
  question of bench/data/out_of_domain_zh.jsonl;
- english_docs: six English and mixed Chinese-English documents
  (tests/quality/data/english_docs), its 27 questions and 8 out-of-scope
  ones (most in English: the generic pack's Latin-script rule);
- office_docs: seven office, plant and appliance documents of a trial
  (tests/quality/data/office_docs: .md with a table, .docx, .pdf, .txt, two
  English files), its 19 questions (6 across scripts) and 6 out-of-scope
  ones;
- kestrel_docs: a marine field station's five English documents and one
  Chinese (tests/quality/data/kestrel_docs: .md with a table, .docx, .pdf,
  .txt), its 28 questions (8 Chinese about English text, 2 English about
  Chinese) and 10 out-of-scope ones, half near the documents' topics;
- starbridge_docs: a software company's bilingual knowledge base (three
  Chinese and three English documents: .md with a table, .txt, .html,
  .docx), its 24 questions (10 across languages) and 8 out-of-scope ones;
- helan_docs and lanfeng_docs: a winery's and a regional airline's
  bilingual documents, written for held-out tests of the cross-script
  keyword channel (2026-12-06; three Chinese and three English files each:
  .md with tables, .txt, .html), 30 and 32 questions (14 and 16 across
  languages) and 8 out-of-scope ones each;
- qinghe_docs: a cold-chain warehouse's bilingual documents from a fresh
  user's trial of that channel (.md with tables, .txt, .docx, .html), its
  34 questions (12 across languages, 9 awkward inputs) and 4 out-of-scope ones;
- xinghai_docs: a software company's staff documents from a third fresh
  user's trial (.md with tables, .txt, .docx, .html, .pdf; one English),
  its 50 questions in staff's own words and 14 out-of-scope ones;
- qiyue_docs: a dental clinic chain's patient and staff documents from a
  fourth fresh user's trial (.md with tables, .txt, .docx, .html, .pdf; one
  English), its 45 questions in patients' own words and 12 out-of-scope ones;
- yuntu_docs: a logistics company's customer and staff documents from a
  fifth fresh user's trial (.md with a table, .txt, .docx, .html, a .pdf
  printed by Chromium; two English), its 49 questions (some across
  languages) and 12 out-of-scope ones;
- mingheng_docs: a law firm's internal rules from a sixth fresh user's
  trial (.md with a table, .txt, .html, .docx, a Chromium .pdf), its 20
  questions in staff's own words and 6 out-of-scope ones;
- aftersales_docs, jiangzhou_docs, lumenfold_docs and taipei_docs: four
  more fresh users' trials (an equipment maker's manuals with codes and a
  .csv parts list; a city hotline's policies; an English SaaS handbook with
  runbooks and two .csv files; a Taipei company's rules in traditional
  characters with an English note), 45, 47, 45 and 45 questions and 12
  out-of-scope ones each;
- vet_docs, clinic_docs, gradschool_docs, runbook_docs and dongchuan_docs:
  five more (a vet clinic's price list, schedule and roster, 25 questions;
  a community health centre's outpatient pages, 50; two graduate schools'
  regulations, one with Word files without heading styles and LibreOffice
  PDFs, 50 and 54; an SRE team's mixed Chinese-English runbooks, 50), each
  with its out-of-scope questions (6 or 12);
- ehs_docs, homvia_docs and hkinsure_docs: three more (a coatings factory's
  safety procedures, Word files with and without heading styles and a
  LibreOffice PDF; a cross-border shop's English customer pages and Chinese
  agent notes; a Hong Kong broker's policy wordings in traditional Chinese and
  English with premium tables by age and days), 50 questions and 12
  out-of-scope ones each;
- wuye_docs, coop_docs, devdocs_docs and hotline_docs: four more (a property
  manager's residents' handbook, fee tables, FAQ page and notices; a farmers'
  cooperative's dosage tables, calendar, rules and a frost handout; a SaaS
  company's mixed Chinese-English API docs with error-code tables and a
  changelog; a city hotline's policy documents, points tables and FAQ), 50
  questions and 12 out-of-scope ones each;
- huoguo_docs and lab_docs: two more the same day (a hotpot chain's kitchen SOPs,
  portion and allergen tables; a university instrument lab's booking rules,
  fees, safety rules and an English microscope guide), 50 and 12 each.
- autoservice_docs, school_docs and crossborder_docs: three more (a car
  dealership's maintenance tables, warranty, price list and FAQ; a secondary
  school's exam rules, timetables, calendar PDF and leave rules; a cross-border
  e-commerce team's Chinese SOPs and English rate sheet and notes), 50 and 12 each;
- gym_docs, warehouse_docs and guesthouse_docs: three more (a gym's card
  prices, class timetable, trainer packages and membership agreement; a
  logistics warehouse's receiving and picking SOPs, fee schedules, safety rules
  and client labelling page; a guesthouse's room prices, house rules, travel
  guide and an English guest FAQ), 50 and 12 each; expat_hr_docs (a foreign
  company's Shanghai HR policies in English with two Chinese notices, asked
  in English and Chinese), 50 and 12;
- jinxiu_docs and labsafety_docs: two more (a Hangzhou residential property
  office's fee tables, renovation, pet and parking rules, holiday roster and
  resident FAQ; a university chemistry lab's safety rules, chemical storage
  table, waste and emergency procedures, two of them in English), 50 and 12 each;
  xinghe_kg_docs (a kindergarten's parent handbook, fees, health, pick-up and
  meal rules, calendar and FAQ, asked as parents ask in a chat), 50 and 12.

Answer (extractive, no LLM) must put the answering passage first, answer
the questions they answer, abstain on those they do not, and quote the
answering line. The rules are the
generic pack's (domains/generic/recipes.json; docs/benchmarks.md "Abstention
on collections without a pack", "English own documents"). Floors in
tests/quality/floors.py (the set's name)."""
from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import load_dataset, run_queries
from tests.quality.floors import FLOORS
from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, patient_gateway

pytestmark = [pytest.mark.quality, pytest.mark.asyncio(loop_scope="session")]
REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
#: set -> (documents, {kind of out-of-scope question: its questions})
SETS = {
    "company_docs": (7, {"workplace_abstained": DATA / "company_docs" / "out_of_scope.jsonl",
                         "general_abstained": REPO / "bench" / "data" / "out_of_domain_zh.jsonl"}),
    "english_docs": (6, {"out_of_scope_abstained": DATA / "english_docs" / "out_of_scope.jsonl"}),
    "office_docs": (7, {"out_of_scope_abstained": DATA / "office_docs" / "out_of_scope.jsonl"}),
    "kestrel_docs": (6, {"out_of_scope_abstained": DATA / "kestrel_docs" / "out_of_scope.jsonl"}),
    "starbridge_docs": (6, {"out_of_scope_abstained": DATA / "starbridge_docs" / "out_of_scope.jsonl"}),
    "helan_docs": (6, {"out_of_scope_abstained": DATA / "helan_docs" / "out_of_scope.jsonl"}),
    "lanfeng_docs": (6, {"out_of_scope_abstained": DATA / "lanfeng_docs" / "out_of_scope.jsonl"}),
    "qinghe_docs": (6, {"out_of_scope_abstained": DATA / "qinghe_docs" / "out_of_scope.jsonl"}),
    "xinghai_docs": (7, {"out_of_scope_abstained": DATA / "xinghai_docs" / "out_of_scope.jsonl"}),
    "qiyue_docs": (7, {"out_of_scope_abstained": DATA / "qiyue_docs" / "out_of_scope.jsonl"}),
    "yuntu_docs": (8, {"out_of_scope_abstained": DATA / "yuntu_docs" / "out_of_scope.jsonl"}),
    "mingheng_docs": (6, {"out_of_scope_abstained": DATA / "mingheng_docs" / "out_of_scope.jsonl"}),
    "aftersales_docs": (8, {"out_of_scope_abstained": DATA / "aftersales_docs" / "out_of_scope.jsonl"}),
    "jiangzhou_docs": (8, {"out_of_scope_abstained": DATA / "jiangzhou_docs" / "out_of_scope.jsonl"}),
    "lumenfold_docs": (9, {"out_of_scope_abstained": DATA / "lumenfold_docs" / "out_of_scope.jsonl"}),
    "taipei_docs": (7, {"out_of_scope_abstained": DATA / "taipei_docs" / "out_of_scope.jsonl"}),
    "vet_docs": (5, {}),  # none of its 6 out-of-scope questions refused yet: no floor that could fail
    "clinic_docs": (8, {"out_of_scope_abstained": DATA / "clinic_docs" / "out_of_scope.jsonl"}),
    "gradschool_docs": (8, {}),  # 1 of its 12 out-of-scope questions refused: no floor that could fail
    "runbook_docs": (9, {"out_of_scope_abstained": DATA / "runbook_docs" / "out_of_scope.jsonl"}),
    "dongchuan_docs": (6, {"out_of_scope_abstained": DATA / "dongchuan_docs" / "out_of_scope.jsonl"}),
    "ehs_docs": (8, {"out_of_scope_abstained": DATA / "ehs_docs" / "out_of_scope.jsonl"}),
    "homvia_docs": (8, {"out_of_scope_abstained": DATA / "homvia_docs" / "out_of_scope.jsonl"}),
    "hkinsure_docs": (8, {}),  # none of its 12 out-of-scope questions refused yet: no floor that could fail
    "wuye_docs": (6, {"out_of_scope_abstained": DATA / "wuye_docs" / "out_of_scope.jsonl"}),
    "coop_docs": (8, {}),  # none of its 12 out-of-scope questions refused yet: no floor that could fail
    "devdocs_docs": (9, {"out_of_scope_abstained": DATA / "devdocs_docs" / "out_of_scope.jsonl"}),
    "hotline_docs": (7, {}),  # 1 of its 12 out-of-scope questions refused: no floor that could fail
    "huoguo_docs": (7, {"out_of_scope_abstained": DATA / "huoguo_docs" / "out_of_scope.jsonl"}),
    "lab_docs": (7, {"out_of_scope_abstained": DATA / "lab_docs" / "out_of_scope.jsonl"}),
    "autoservice_docs": (7, {"out_of_scope_abstained": DATA / "autoservice_docs" / "out_of_scope.jsonl"}),
    "school_docs": (7, {"out_of_scope_abstained": DATA / "school_docs" / "out_of_scope.jsonl"}),
    "crossborder_docs": (8, {"out_of_scope_abstained": DATA / "crossborder_docs" / "out_of_scope.jsonl"}),
    "gym_docs": (8, {}),  # 2 of its 12 out-of-scope questions refused: no floor that could fail
    "warehouse_docs": (8, {"out_of_scope_abstained": DATA / "warehouse_docs" / "out_of_scope.jsonl"}),
    "guesthouse_docs": (7, {"out_of_scope_abstained": DATA / "guesthouse_docs" / "out_of_scope.jsonl"}),
    "expat_hr_docs": (7, {"out_of_scope_abstained": DATA / "expat_hr_docs" / "out_of_scope.jsonl"}),
    "jinxiu_docs": (7, {"out_of_scope_abstained": DATA / "jinxiu_docs" / "out_of_scope.jsonl"}),
    "labsafety_docs": (8, {"out_of_scope_abstained": DATA / "labsafety_docs" / "out_of_scope.jsonl"}),
    "xinghe_kg_docs": (7, {"out_of_scope_abstained": DATA / "xinghe_kg_docs" / "out_of_scope.jsonl"}),
}


async def _ingest(address: str, name: str, expected: int) -> None:
    files = [gateway_pb2.IngestFile(name=f"{name}/{p.name}", content=p.read_bytes())
             for p in sorted((DATA / name).iterdir()) if p.suffix in (".txt", ".md", ".pdf", ".docx", ".html", ".csv") and p.stem != "README"]
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
        reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Ingest(
            gateway_pb2.IngestRequest(files=files, collection=name.replace("_", "")), timeout=PATIENT_SECONDS)
    assert len(files) == expected and [f.status for f in reply.files] == [gateway_pb2.FILE_STATUS_STORED] * expected, reply.files


async def _answers(address: str, mesh, name: str, rows: list[dict]) -> list:
    answered = await run_queries(address, rows, 10, concurrency=4, timeout=PATIENT_SECONDS, answers=True,
                                 judge_address=mesh.addresses["judge"], collections=(name.replace("_", ""),))
    assert not [r.error for r in answered if r.error]
    return answered


@pytest.mark.parametrize("name", sorted(SETS))
async def test_own_documents_answer_what_they_hold_and_abstain_on_what_they_do_not(mesh, name):
    documents, out_of_scope = SETS[name]
    floors = FLOORS[name]
    async with patient_gateway(mesh) as address:
        await _ingest(address, name, documents)
        replies = await _answers(address, mesh, name, load_dataset(DATA / name / "queries.jsonl"))
        rates = {"first": sum(r.first_gold_rank == 1 for r in replies) / len(replies),
                 "answered": sum(r.answer_mode != "abstained" for r in replies) / len(replies),
                 "quotes_gold": sum(bool(r.answer_quotes_gold) for r in replies) / len(replies)}
        counts = {}
        for kind, path in out_of_scope.items():
            rows = load_dataset(path)
            rows = rows[::5] if path.parent.name == "data" and path.parent.parent.name == "bench" else rows
            abstained = [r.answer_mode == "abstained" for r in await _answers(address, mesh, name, rows)]
            rates[kind], counts[kind] = sum(abstained) / len(abstained), len(abstained)
    print(f"{name}: {len(replies)} answerable, out-of-scope {counts}: "
          + ", ".join(f"{k} {v:.4f} (floor {floors[k]})" for k, v in rates.items()))
    assert set(floors) == set(rates) and all(rates[k] >= floors[k] for k in floors), (rates, floors)
