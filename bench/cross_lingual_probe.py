"""Probe: a dictionary-translated keyword channel across writing systems.

For each own-document set, the question's content words translated with
CC-CEDICT (Chinese -> English glosses; English -> the Chinese headwords whose
short gloss holds the word) and ranked by BM25 over the chunks of documents in
the *other* writing system only. Compared with GraphMesh's Search order, and
fused with it several ways offline. Prints R@1 per set for cross-lingual
questions and same-language ones, and intrusions (other-system chunks in the
top five of a question answered in its own language).

    PYTHONPATH=.:gen/python python -m pytest bench/cross_lingual_probe.py -q -s \\
        -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import bm25s
import grpc
import pytest

from bench.own_docs_naive import SETS
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import _squeeze, gold_passages, load_dataset
from services.common.cross_lingual import Lexicon
from services.common.text import document_terms, writing_system
from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, patient_gateway

pytestmark = [pytest.mark.asyncio(loop_scope="session")]
OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "cross_lingual_probe.json"
DEPTH = 40


async def _chunks(dsn: str, collection: str) -> list[tuple[str, str, str]]:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT c.heading_path, c.text, d.script FROM chunks c JOIN documents d ON d.id = c.document_id "
                                "WHERE d.collection = $1 ORDER BY c.id", collection)
    finally:
        await conn.close()
    return [(" ".join(r["heading_path"] or []) + " " + r["text"], r["text"], r["script"]) for r in rows]


async def test_probe(mesh):
    lexicon = Lexicon.load()
    sets = os.environ.get("SETS", "english_docs,office_docs,kestrel_docs,starbridge_docs").split(",")
    saved = {}
    async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            for name in sets:
                questions, folder = SETS[name]
                collection = f"xl_{name.removesuffix('_docs')}"
                files = [gateway_pb2.IngestFile(name=f"{collection}/{p.name}", content=p.read_bytes())
                         for p in sorted(folder.iterdir()) if p.suffix in (".txt", ".md", ".pdf", ".docx", ".html") and p.stem != "README"]
                await stub.Ingest(gateway_pb2.IngestRequest(files=files, collection=collection), timeout=1800)
                chunks = await _chunks(mesh.pg_dsn, collection)
                by_script = {}
                for i, (bm_text, _, script) in enumerate(chunks):
                    by_script.setdefault(script, []).append(i)
                indexes = {}
                for script, ids in by_script.items():
                    index = bm25s.BM25()
                    index.index([document_terms(chunks[i][0]) for i in ids],
                                show_progress=False)
                    indexes[script] = (index, ids)
                rows = load_dataset(questions)
                out = []
                for row in rows:
                    golds = [_squeeze(g) for g in gold_passages(row)]
                    search = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=DEPTH, collections=[collection]),
                                               timeout=PATIENT_SECONDS)
                    g_texts = [r.text for r in search.results]
                    q_script = writing_system(row["query"])
                    other = "cjk" if q_script == "latin" else "latin"
                    translated = lexicon.translate(row["query"], to=other)
                    t_texts, t_scores = [], []
                    if other in indexes and translated:
                        index, ids = indexes[other]
                        docs, scores = index.retrieve([translated], k=min(DEPTH, len(ids)), show_progress=False)
                        t_texts = [chunks[ids[int(d)]][1] for d, s in zip(docs[0], scores[0]) if s > 0]
                        t_scores = [float(s) for s in scores[0] if s > 0]
                    gold_script = next((chunks[i][2] for i in range(len(chunks)) if any(g in _squeeze(chunks[i][1]) for g in golds)), None)
                    out.append({"id": row["id"], "query": row["query"], "q_script": q_script, "gold_script": gold_script,
                                "translated": translated, "graphmesh": g_texts, "scripts": {t: s for _, t, s in chunks},
                                "t_texts": t_texts, "t_scores": t_scores, "golds": golds})
                saved[name] = out
                print(name, len(out), flush=True)
    OUT.write_text(json.dumps(saved, ensure_ascii=False), encoding="utf-8")
