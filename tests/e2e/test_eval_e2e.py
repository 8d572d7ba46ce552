"""``graphmesh eval`` end to end against the in-process mesh (real gRPC
servers, PostgreSQL+pgvector, Neo4j): Search and Answer+Judge runs saved as
artifacts, then ``eval compare`` between two of them."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.main import main

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "law_sample.jsonl"
pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.e2e]
QUERIES = [
    {"id": "wages", "query": "用人单位超过一个月不满一年未与劳动者订立书面劳动合同，应当向劳动者每月支付多少工资？", "gold": ["5689"], "category": "labour"},
    # A question whose evidence passes abstention (什么是实用新型？ alone
    # does not: docs/benchmarks.md, "Abstention").
    {"id": "utility", "query": "发明创造包括发明、实用新型和外观设计吗？", "gold": ["2"], "category": "patent", "reference": "实用新型是指对产品的形状、构造或者其结合所提出的适于实用的新的技术方案。"},
    {"id": "none", "query": "火星上的税率是多少？", "gold": ["no-such-article"], "category": "patent"},
]


async def test_eval_runs_save_artifacts_and_compare(mesh, tmp_path, monkeypatch, capsys):
    async with grpc.aio.insecure_channel(mesh.gateway) as ch:
        reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Ingest(gateway_pb2.IngestRequest(jsonl=SAMPLE.read_bytes(), domain_pack="law_zh"), timeout=300)
    assert not reply.failures
    dataset = tmp_path / "dev.jsonl"
    dataset.write_text("\n".join(json.dumps(q, ensure_ascii=False) for q in QUERIES), encoding="utf-8")
    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", mesh.gateway)
    monkeypatch.setenv("GRAPHMESH_JUDGE_ADDR", mesh.addresses["judge"])
    search_run, answer_run = tmp_path / "search.json", tmp_path / "answers.json"

    code = await asyncio.to_thread(main, ["eval", "--dataset", str(dataset), "--out", str(search_run), "--json"])
    assert code == 0
    art = json.loads(search_run.read_text())
    totals = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert totals == art["totals"] and art["totals"]["n"] == 3
    rows = {r["id"]: r for r in art["rows"]}
    assert rows["wages"]["first_gold_rank"] is not None and rows["wages"]["first_gold_rank"] <= 10
    assert rows["none"]["first_gold_rank"] is None and "total" in rows["none"]["stages_ms"]
    assert set(art["totals"]["category_recall@10"]) == {"labour", "patent"}
    assert art["dataset"]["n"] == 3 and len(art["config_hash"]) == 16 and art["git"]["commit"]

    code = await asyncio.to_thread(main, ["eval", "--dataset", str(dataset), "--answers", "--top-k", "5", "--out", str(answer_run)])
    assert code == 0
    judged = {r["id"]: r for r in json.loads(answer_run.read_text())["rows"]}
    utility = judged["utility"]["judge"]
    rank = judged["utility"]["first_gold_rank"]
    assert utility["mrr@10"] == pytest.approx(1 / rank if rank else 0.0)
    assert utility["cot_quality"] is None                      # no LLM: not computed, never 0 or 1
    assert utility["correctness"] is not None and 0 < utility["correctness"] <= 1  # rule vs the reference answer
    assert judged["utility"]["answer_mode"] == "extractive"
    capsys.readouterr()

    code = await asyncio.to_thread(main, ["eval", "compare", str(search_run), str(answer_run)])
    out = capsys.readouterr().out
    assert code == 0 and "configs differ in: answers, top_k" in out and "recall@10" in out
    assert "queries better" in out and "queries worse" in out


async def test_eval_rejects_bad_usage(tmp_path, capsys):
    assert await asyncio.to_thread(main, ["eval"]) == 2
    assert await asyncio.to_thread(main, ["eval", "compare", "only-one.json"]) == 2
    assert await asyncio.to_thread(main, ["eval", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    assert "cannot read run artifact" in capsys.readouterr().err
