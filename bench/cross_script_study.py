"""The other language's best passage (issues 23 and 24): where a collection
mixes Chinese and English documents, how often the chunk answering a
question asked in one language about a fact stated only in the other comes
first and in the top ten, beside the questions answered in their own
language, and the gap between the best cosine in each language that
``services.fuser.core.cross_script_first`` reads.

Run as a pytest module (it gets the quality gate's in-process mesh); the
fuser's settings come from the environment, so one run per value of
GRAPHMESH_FUSER_CROSS_SCRIPT_COSINE_GAP (a negative value: never by cosine):

    GRAPHMESH_FUSER_CROSS_SCRIPT_COSINE_GAP=0.045 OUT=bench/results/cross_script_0.045.json \\
        PYTHONPATH=.:gen/python python -m pytest bench/cross_script_study.py -q -s \\
        -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh

SETS (comma-separated names of bench/own_docs_naive.SETS) picks the sets,
EXTRA adds folders laid out the same way (queries.jsonl beside the
documents). Then the gap chosen by leave-one-set-out cross-validation over
several runs (each file's gap read from its name):

    python bench/cross_script_study.py choose bench/results/cross_script_*.json
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import grpc
import pytest

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SETS = ("english_docs,office_docs,kestrel_docs,starbridge_docs,handbook_docs,helan_docs,lanfeng_docs,"
                "qinghe_docs")


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def summary(saved: dict) -> dict[str, dict[str, list[int]]]:
    """{set: {"cross" | "own": [questions, gold first, gold in the top ten]}}."""
    out: dict[str, dict[str, list[int]]] = {}
    for name, rows in saved.items():
        for row in rows:
            counts = out.setdefault(name, {}).setdefault("cross" if row["cross"] else "own", [0, 0, 0])
            counts[0] += 1
            counts[1] += row["rank"] == 1
            counts[2] += row["rank"] is not None and row["rank"] <= 10
    return out


def report(saved: dict) -> None:
    """Prints each set's figures and the pooled ones."""
    pooled = {"cross": [0, 0, 0], "own": [0, 0, 0]}
    for name, kinds in summary(saved).items():
        for kind, (n, first, ten) in sorted(kinds.items()):
            print(f"{name:16s} {kind:5s} {n:3d} questions: first {first:3d}, top ten {ten:3d}")
            pooled[kind] = [a + b for a, b in zip(pooled[kind], (n, first, ten))]
    for kind, (n, first, ten) in pooled.items():
        print(f"{'pooled':16s} {kind:5s} {n:3d} questions: first {first:3d}, top ten {ten:3d}")


def choose(paths: list[str]) -> None:
    """Leave one set out: for each set, the gap whose runs put the most golds
    first on the other sets (the smaller gap on ties), and what it gives on
    the one left out."""
    runs = {}
    for path in paths:
        gap = float(re.search(r"cross_script_(-?[0-9.]+)\.json$", path).group(1))
        runs[gap] = json.loads(Path(path).read_text(encoding="utf-8"))
    firsts = {gap: {name: sum(r["rank"] == 1 for r in rows) for name, rows in saved.items()} for gap, saved in runs.items()}
    sets = sorted(next(iter(firsts.values())))
    total = {}
    for held in sets:
        best = max(firsts, key=lambda g: (sum(v for s, v in firsts[g].items() if s != held), -g))
        total[held] = (best, firsts[best][held])
        print(f"{held:16s} gap chosen on the others {best:+.3f}: first {firsts[best][held]}")
    print("cross-validated first:", sum(v for _, v in total.values()),
          "| per gap, all sets:", {g: sum(v.values()) for g, v in sorted(firsts.items())})


pytestmark = [pytest.mark.asyncio(loop_scope="session")]


async def _scripts(dsn: str, collection: str) -> list[tuple[str, str]]:
    """(text, writing system) of every chunk of ``collection``."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT c.text, d.script FROM chunks c JOIN documents d ON d.id = c.document_id "
                                "WHERE d.collection = $1", collection)
    finally:
        await conn.close()
    return [(_squeeze(r["text"]), r["script"]) for r in rows]


async def test_cross_script(mesh):
    from bench.own_docs_naive import SETS
    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from services.cli.evaluate import gold_passages, load_dataset
    from services.common.text import writing_system
    from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, patient_gateway

    wanted = {name: SETS[name] for name in os.environ.get("SETS", DEFAULT_SETS).split(",") if name}
    for folder in filter(None, os.environ.get("EXTRA", "").split(",")):
        wanted[Path(folder).name] = (Path(folder) / "queries.jsonl", Path(folder))
    saved: dict[str, list[dict]] = {}
    async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            for name, (questions, folder) in wanted.items():
                collection = f"xs_{name.removesuffix('_docs')}"
                files = [gateway_pb2.IngestFile(name=f"{collection}/{p.name}", content=p.read_bytes())
                         for p in sorted(folder.iterdir())
                         if p.suffix in (".txt", ".md", ".pdf", ".docx", ".html") and p.stem != "README"]
                await stub.Ingest(gateway_pb2.IngestRequest(files=files, collection=collection), timeout=1800)
                chunks = await _scripts(mesh.pg_dsn, collection)
                rows = []
                for row in load_dataset(questions):
                    golds = [_squeeze(g) for g in gold_passages(row)]
                    gold_script = next((script for text, script in chunks if any(g in text for g in golds)), None)
                    if gold_script is None:
                        continue
                    reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=40, collections=[collection]),
                                              timeout=PATIENT_SECONDS)
                    own = writing_system(row["query"])
                    scores = [{c.channel: c for c in r.channel_scores} for r in reply.results]
                    own_best = max((s["pg.vector"].score for r, s in zip(reply.results, scores)
                                    if r.script == own and "pg.vector" in s), default=None)
                    other_best = max((s["pg.translated"].score for s in scores
                                      if "pg.translated" in s and s["pg.translated"].rank <= 3), default=None)
                    rows.append({"id": row["id"], "cross": gold_script != own,
                                 "rank": next((i + 1 for i, r in enumerate(reply.results)
                                               if any(g in _squeeze(r.text) for g in golds)), None),
                                 "gap": None if own_best is None or other_best is None else other_best - own_best})
                saved[name] = rows
                print(name, len(rows), flush=True)
    out = Path(os.environ.get("OUT", REPO / "bench" / "results" / "cross_script.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(saved, ensure_ascii=False, indent=1), encoding="utf-8")
    report(saved)


if __name__ == "__main__":
    if sys.argv[1:2] == ["choose"]:
        choose(sys.argv[2:])
    else:
        for path in sys.argv[1:]:
            report(json.loads(Path(path).read_text(encoding="utf-8")))
