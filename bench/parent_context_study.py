"""Parent context on the documents dev set (issue 24 item 1): small chunks
for retrieval, packed with their parent section, against the same chunks
bare and against 512-token chunks. Not a test; run it as a pytest module so
it gets the quality gate's in-process mesh (embedded PostgreSQL and Neo4j,
e5onnx):

    PYTHONPATH=.:gen/python python -m pytest bench/parent_context_study.py -q -s \\
        -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh

It ingests the three design documents (tests/quality/data/docs) as files
twice: collection ``docs256`` with the generic pack's 256/32-token chunks
and ``docs512`` with 512/64 (the old default), then asks the 79 questions of
queries-docs-dev.jsonl with Search and Answer (extractive) in three arms:

- ``256``: 256-token chunks, no parent context (today's default);
- ``256+parent``: the same collection, parent context on
  (GRAPHMESH_GATEWAY_PARENT_CONTEXT__ENABLED; budget PARENT_TOKENS, several budgets
  when PARENT_BUDGETS="384,512" is set);
- ``512``: 512-token chunks, no parent context (SKIP_512=1 leaves it out).

CONTEXT_CHARS=N gives every arm a context budget of N characters
(GatewaySettings.budget_chars; default 6,000, of which the document-chunk
share is 35%). RESULTS_NAME names the saved file.

Prints R@1 / R@10 / MRR@10 of the answering chunk (ranks count chunks, gold
by text, as tests/quality/test_docs_quality.py scores it), the share of
extractive answers that quote the gold passage and the share of packed
contexts (what an LLM would read) that hold it, each arm against ``256``
with a paired bootstrap interval and sign-flip p (services.cli.significance),
and saves everything to bench/results/parent_context_study.json.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import grpc
import pytest

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import _squeeze, gold_passages, load_dataset, run_queries, summarise
from services.cli.significance import compare_ranks, paired_delta
from tests.quality.gate import patient_gateway

pytestmark = [pytest.mark.asyncio(loop_scope="session")]

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "quality" / "data"
RESULTS = REPO / "bench" / "results" / os.environ.get("RESULTS_NAME", "parent_context_study.json")
PATIENT = 120.0
OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
BUDGETS = [int(b) for b in os.environ.get("PARENT_BUDGETS", "512").split(",") if b.strip()]
#: Context budget of every arm (characters; GatewaySettings.budget_chars), default the gateway's.
CONTEXT_CHARS = int(os.environ.get("CONTEXT_CHARS", "0"))
SKIP_512 = os.environ.get("SKIP_512", "") == "1"


def gateway(mesh, **overrides):
    """The quality gate's patient gateway over ``mesh`` with ``overrides``
    (GatewaySettings fields); the context budget of CONTEXT_CHARS when set."""
    if CONTEXT_CHARS:
        overrides.setdefault("budget_chars", CONTEXT_CHARS)
    return patient_gateway(mesh, **overrides)


#: File types the own-documents sets are made of.
DOCUMENT_SUFFIXES = (".txt", ".md", ".pdf", ".docx", ".html", ".csv")


async def ingest(address: str, collection: str, folder: Path = DATA / "docs") -> None:
    """Ingests the documents of ``folder`` (not its README) into ``collection``."""
    # document ids are store-wide: each collection gets its own names
    files = [gateway_pb2.IngestFile(name=f"{collection}/{p.name}", content=p.read_bytes())
             for p in sorted(folder.iterdir()) if p.suffix in DOCUMENT_SUFFIXES and p.stem != "README"]
    async with grpc.aio.insecure_channel(address, options=OPTIONS) as ch:
        reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Ingest(
            gateway_pb2.IngestRequest(files=files, collection=collection), timeout=PATIENT)
    assert [f.status for f in reply.files] == [gateway_pb2.FILE_STATUS_STORED] * len(files), reply.files


async def measure(mesh, address: str, collection: str, rows: list[dict]) -> dict:
    searched = await run_queries(address, rows, 10, concurrency=2, timeout=PATIENT, collections=(collection,))
    answered = await run_queries(address, rows, 10, concurrency=2, timeout=PATIENT, answers=True,
                                 judge_address=mesh.addresses["judge"], collections=(collection,))
    errors = [r.error for r in [*searched, *answered] if r.error]
    assert not errors, errors[:3]
    summary = summarise(searched)
    in_context, context_chars = await context_holds_gold(address, collection, rows)
    return {
        "context_holds_gold": in_context,
        "context_chars": context_chars,
        "ranks": {r.id: r.first_gold_rank for r in searched},
        "quotes": {r.id: bool(r.answer_quotes_gold) for r in answered},
        "abstained": sum(r.answer_mode == "abstained" for r in answered),
        "search_p50_ms": summary.get("latency_ms_p50"),
        "answers": {r.id: r.answer for r in answered},
    }


async def context_holds_gold(address: str, collection: str, rows: list[dict]) -> tuple[dict[str, bool], float]:
    """Per question, whether the packed context (what an LLM reads) holds a
    gold passage; and the mean context length (characters)."""
    held, lengths = {}, []
    async with grpc.aio.insecure_channel(address, options=OPTIONS) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for row in rows:
            reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=10, collections=[collection]),
                                      timeout=PATIENT)
            context = _squeeze(reply.context)
            held[str(row.get("id"))] = any(_squeeze(g) in context for g in gold_passages(row))
            lengths.append(len(reply.context))
    return held, sum(lengths) / max(1, len(lengths))


def _line(name: str, arm: dict) -> str:
    ranks = list(arm["ranks"].values())
    n = len(ranks)
    r1 = sum(r == 1 for r in ranks) / n
    r10 = sum(r is not None and r <= 10 for r in ranks) / n
    mrr = sum(1 / r for r in ranks if r is not None and r <= 10) / n
    quotes = sum(arm["quotes"].values()) / n
    held = sum(arm["context_holds_gold"].values()) / n
    return (f"{name:>14}: R@1 {r1:.3f}  R@10 {r10:.3f}  MRR@10 {mrr:.3f}  quotes {quotes:.3f}  "
            f"context holds gold {held:.3f} ({arm['context_chars']:.0f} chars)  abstained {arm['abstained']}")


async def test_parent_context_study(mesh):
    rows = load_dataset(DATA / "queries-docs-dev.jsonl")
    arms: dict[str, dict] = {}
    async with gateway(mesh) as address:
        await ingest(address, "docs256")
        arms["256"] = await measure(mesh, address, "docs256", rows)
    for budget in BUDGETS:
        async with gateway(mesh, parent_context={"enabled": True, "tokens": budget}) as address:
            arms[f"256+parent{budget}"] = await measure(mesh, address, "docs256", rows)
    if not SKIP_512:
        async with gateway(mesh, chunk_tokens=512, chunk_overlap=64) as address:
            await ingest(address, "docs512")
            arms["512"] = await measure(mesh, address, "docs512", rows)

    base = arms["256"]
    report = {"arms": {}, "vs_256": {}}
    print()
    for name, arm in arms.items():
        print(_line(name, arm))
        report["arms"][name] = {k: v for k, v in arm.items()}
        if name == "256":
            continue
        deltas = {m: d.as_dict() for m, d in compare_ranks(base["ranks"], arm["ranks"]).items()}
        shared = sorted(base["quotes"].keys() & arm["quotes"].keys())
        deltas["quotes"] = paired_delta([float(base["quotes"][q]) for q in shared],
                                        [float(arm["quotes"][q]) for q in shared]).as_dict()
        deltas["context"] = paired_delta([float(base["context_holds_gold"][q]) for q in shared],
                                         [float(arm["context_holds_gold"][q]) for q in shared]).as_dict()
        report["vs_256"][name] = deltas
        for metric, d in deltas.items():
            print(f"    {name} - 256 {metric:>9}: {d['delta']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] p {d['p_value']:.3f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"saved {RESULTS}")
