"""Chunk size on the documents dev set (issue 24): the three design
documents (tests/quality/data/docs) ingested as files with
GatewaySettings.ingest.chunk_tokens = CHUNK (overlap an eighth), then the 79
questions of queries-docs-dev.jsonl: how many have the answering passage
first (Search, top 10), and how many extractive answers quote it. Saves
per-question ranks to bench/results/<DOCSET>_chunk_<CHUNK>.json, so sizes can be
compared (and cross-validated) afterwards, and each Answer's packed context,
answer and number of sources, so the extractive answer can be replayed
offline on the same contexts (bench/extractive_probe.py), and the same of
each out-of-scope question ("out_of_scope"). Not a test; run it as a pytest
module so it gets the quality gate's in-process mesh. DOCSET=company_docs runs
the company's seven documents and 37 questions instead (never tuned on); DOCSET may also be a folder
laid out the same way (queries.jsonl, out_of_scope.jsonl beside the documents):

    CHUNK=384 PYTHONPATH=.:gen/python python -m pytest bench/docs_chunk_sweep.py -q -s \\
        -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import grpc
import pytest

from bench.parent_context_study import DATA, OPTIONS, PATIENT, gateway, ingest
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import _squeeze, gold_passages, load_dataset, run_queries

pytestmark = [pytest.mark.asyncio(loop_scope="session")]
REPO = Path(__file__).resolve().parents[1]
#: DOCSET -> (its questions, its documents): the design documents (the dev set) and the company's documents
#: (tests/quality/test_own_docs_quality.py's, never tuned on).
DOCUMENT_SETS = {"docs": (DATA / "queries-docs-dev.jsonl", DATA / "docs"),
                 "company_docs": (DATA / "company_docs" / "queries.jsonl", DATA / "company_docs"),
                 "english_docs": (DATA / "english_docs" / "queries.jsonl", DATA / "english_docs"),
                 "orbit_docs": (DATA / "orbit_docs" / "queries.jsonl", DATA / "orbit_docs"),
                 "handbook_docs": (DATA / "handbook_docs" / "queries.jsonl", DATA / "handbook_docs"),
                 "office_docs": (DATA / "office_docs" / "queries.jsonl", DATA / "office_docs"),
                 "kestrel_docs": (DATA / "kestrel_docs" / "queries.jsonl", DATA / "kestrel_docs"),
                 "starbridge_docs": (DATA / "starbridge_docs" / "queries.jsonl", DATA / "starbridge_docs"),
                 "helan_docs": (DATA / "helan_docs" / "queries.jsonl", DATA / "helan_docs"),
                 "lanfeng_docs": (DATA / "lanfeng_docs" / "queries.jsonl", DATA / "lanfeng_docs"),
                 "qinghe_docs": (DATA / "qinghe_docs" / "queries.jsonl", DATA / "qinghe_docs")}


async def test_chunk_size(mesh):
    chunk = int(os.environ.get("CHUNK", "256"))
    docset = os.environ.get("DOCSET", "docs")
    if docset not in DOCUMENT_SETS and Path(docset).is_dir():  # a folder laid out like them (questions kept back)
        docset, DOCUMENT_SETS[Path(docset).name] = Path(docset).name, (Path(docset) / "queries.jsonl", Path(docset))
    questions, folder = DOCUMENT_SETS[docset]
    rows = load_dataset(questions)
    ranks = {}
    answers, unanswerable = {}, {}
    async with gateway(mesh, ingest={"chunk_tokens": chunk, "chunk_overlap": chunk // 8, "embed_batch": 32}) as address:
        collection = f"sweep{chunk}"
        await ingest(address, collection, folder)
        async with grpc.aio.insecure_channel(address, options=OPTIONS) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            for row in rows:
                reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=int(os.environ.get("SEARCH_TOP_K", "10")), collections=[collection]),
                                          timeout=PATIENT)
                golds = [_squeeze(g) for g in gold_passages(row)]
                ranks[str(row.get("id"))] = next((i + 1 for i, r in enumerate(reply.results)
                                                  if any(g in _squeeze(r.text) for g in golds)), None)
                answer = await stub.Answer(gateway_pb2.AnswerRequest(query=row["query"], top_k=10, collections=[collection]),
                                           timeout=PATIENT)
                answers[str(row.get("id"))] = {
                    "context": answer.search.context, "answer": answer.answer,
                    "mode": gateway_pb2.AnswerMode.Name(answer.mode), "answerability": round(answer.answerability, 4),
                    "quotes": any(g in _squeeze(answer.answer) for g in golds)}
            out_of_scope = load_dataset(folder / "out_of_scope.jsonl") if (folder / "out_of_scope.jsonl").is_file() else []
            for row in out_of_scope:  # kept for offline studies of what an answer to them quotes
                answer = await stub.Answer(gateway_pb2.AnswerRequest(query=row["query"], top_k=10, collections=[collection]),
                                           timeout=PATIENT)
                unanswerable[str(row.get("id"))] = {"context": answer.search.context, "answer": answer.answer,
                                                    "mode": gateway_pb2.AnswerMode.Name(answer.mode),
                                                    "answerability": round(answer.answerability, 4),
                                                    "reason": answer.attempts[0].reason if answer.attempts else ""}
        answered = await run_queries(address, rows, 10, concurrency=2, timeout=PATIENT, answers=True,
                                     judge_address=mesh.addresses["judge"], collections=(collection,))
        refused = await run_queries(address, out_of_scope, 10, concurrency=2, timeout=PATIENT, answers=True,
                                    judge_address=mesh.addresses["judge"], collections=(collection,))
    quotes = sum(bool(r.answer_quotes_gold) for r in answered)
    first = sum(r == 1 for r in ranks.values())
    by_language: dict[str, list[int]] = {}  # language -> [questions, first, answered, quoted]
    for row, reply in zip(rows, answered):
        counts = by_language.setdefault(row.get("language", "-"), [0, 0, 0, 0])
        counts[0] += 1
        counts[1] += ranks[str(row.get("id"))] == 1
        counts[2] += reply.answer_mode != "abstained"
        counts[3] += bool(reply.answer_quotes_gold)
    for language, (n, top, said, quoted) in sorted(by_language.items()):
        print(f"  {language}: {n} questions, first {top}, answered {said}, quoted {quoted}")
    if refused:
        abstained = sum(r.answer_mode == "abstained" for r in refused)
        print(f"  out of scope: {len(refused)} questions, abstained {abstained}")
    out = REPO / "bench" / "results" / f"{docset}_chunk_{chunk}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"set": docset, "chunk_tokens": chunk, "ranks": ranks, "quotes": quotes, "answers": answers,
                               "out_of_scope": unanswerable},
                              ensure_ascii=False, indent=1))
    print(f"{docset}, chunk {chunk}: answering passage first {first} of {len(rows)}, quoted {quotes} of {len(rows)}")
