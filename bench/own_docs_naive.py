"""GraphMesh beside the naive hybrid on users' own documents (issue 23's
"never below a naive hybrid", issue 24's own documents; not a test).

Each own-document set under tests/quality/data (the documents dev set and
the seven trial sets, never tuned on) is ingested as files into a collection
without a domain pack, with the generic pack's defaults, in the quality
gate's in-process mesh. Then, for each answerable question:

- GraphMesh: the gateway's Search (top_k 10) with its defaults;
- the naive hybrid, what a user could build in an afternoon over the same
  stored chunks: jieba cut_for_search tokens (lower-cased) + BM25 (bm25s)
  over each chunk's heading path and text, exact dot product over the chunk
  vectors stored in PostgreSQL (the same e5onnx embeddings; query vectors
  from the mesh's expander), RRF (k=60) over the top 100 of each;
- BM25 alone and dense alone.

Gold is the answering passage's text (``services.cli.evaluate.gold_passages``):
a result is gold when its text holds it (whitespace squeezed). Printed per
set and pooled over the trial sets (never tuned on) and over all: R@1 / R@10 /
MRR@10 of each, and GraphMesh minus each with a 95% paired bootstrap interval
and a permutation p-value (services/cli/significance.py). Saves the ranks to
bench/results/own_docs_naive.json (OUT overrides it). EXTRA adds folders laid out the same way (questions kept
back outside the repository), pooled apart as well.

    PYTHONPATH=.:gen/python python -m pytest bench/own_docs_naive.py -q -s \\
        -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh

Needs the `bench` extra (bm25s).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import bm25s
import grpc
import jieba
import numpy as np
import pytest

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import _squeeze, gold_passages, load_dataset
from services.cli.significance import RANK_METRICS, compare_ranks, pooled, rank_metric
from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, patient_gateway

pytestmark = [pytest.mark.asyncio(loop_scope="session")]
REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "quality" / "data"
#: set name -> (its questions, its documents); "docs" is the documents dev set (tuned on), the rest are trial sets.
SETS = {"docs": (DATA / "queries-docs-dev.jsonl", DATA / "docs"),
        **{name: (DATA / name / "queries.jsonl", DATA / name)
           for name in ("company_docs", "english_docs", "orbit_docs", "handbook_docs", "office_docs", "kestrel_docs",
                        "starbridge_docs", "helan_docs", "lanfeng_docs", "qinghe_docs")}}
DEV_SETS = ("docs",)
#: EXTRA: comma-separated folders laid out like the trial sets (queries.jsonl beside the documents), e.g. sets kept
#: back outside the repository; reported apart ("kept back pooled") as well as in "all pooled".
KEPT_BACK = tuple(Path(f).name for f in os.environ.get("EXTRA", "").split(",") if f)
SETS.update({Path(f).name: (Path(f) / "queries.jsonl", Path(f)) for f in os.environ.get("EXTRA", "").split(",") if f})
RRF_K = 60
DEPTH = 100
TOP_K = 10
OUT = Path(os.environ.get("OUT", REPO / "bench" / "results" / "own_docs_naive.json"))
ARMS = ("graphmesh", "naive", "bm25", "dense")


def tokens(text: str) -> list[str]:
    """jieba search-mode tokens, lower-cased, without whitespace or punctuation-only ones."""
    return [t.lower() for t in jieba.cut_for_search(text) if t.strip() and any(ch.isalnum() for ch in t)]


def rrf(*orders) -> list[int]:
    """Indices fused by reciprocal rank (k = RRF_K), best first."""
    fused: dict[int, float] = {}
    for order in orders:
        for rank, idx in enumerate(order, 1):
            fused[int(idx)] = fused.get(int(idx), 0.0) + 1.0 / (RRF_K + rank)
    return [i for i, _ in sorted(fused.items(), key=lambda kv: -kv[1])]


def first_gold(texts: list[str], golds: list[str]) -> int | None:
    """1-based rank of the first text holding a gold passage, within TOP_K; None when none does."""
    return next((i + 1 for i, t in enumerate(texts[:TOP_K]) if any(g in _squeeze(t) for g in golds)), None)


async def _chunks(dsn: str, collection: str) -> tuple[list[str], np.ndarray, list[str]]:
    """(chunk text, unit vectors, heading path + text for BM25) of every chunk of ``collection``."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT c.heading_path, c.text, c.embedding::text AS v FROM chunks c "
                                "JOIN documents d ON d.id = c.document_id WHERE d.collection = $1 "
                                "AND c.embedding IS NOT NULL ORDER BY c.id", collection)
    finally:
        await conn.close()
    texts = [" ".join(r["heading_path"] or []) + " " + r["text"] for r in rows]
    return [r["text"] for r in rows], np.stack([np.array(json.loads(r["v"]), dtype=np.float32) for r in rows]), texts


async def test_own_docs_beside_naive(mesh):
    ranks: dict[str, dict[str, dict[str, int | None]]] = {arm: {} for arm in ARMS}
    async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch, \
                grpc.aio.insecure_channel(mesh.addresses["expander"], options=CHANNEL_OPTIONS) as ech:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            expander = expander_pb2_grpc.ExpanderServiceStub(ech)
            for name, (questions, folder) in SETS.items():
                collection = f"naive_{name.removesuffix('_docs')}"
                files = [gateway_pb2.IngestFile(name=f"{collection}/{p.name}", content=p.read_bytes())
                         for p in sorted(folder.iterdir()) if p.suffix in (".txt", ".md", ".pdf", ".docx", ".html") and p.stem != "README"]
                reply = await stub.Ingest(gateway_pb2.IngestRequest(files=files, collection=collection), timeout=1800)
                assert all(f.status == gateway_pb2.FILE_STATUS_STORED for f in reply.files), reply.files
                chunk_texts, vectors, bm25_texts = await _chunks(mesh.pg_dsn, collection)
                index = bm25s.BM25()
                index.index([tokens(t) for t in bm25_texts], show_progress=False)
                rows = load_dataset(questions)
                embedded = await expander.Embed(expander_pb2.EmbedRequest(texts=[r["query"] for r in rows],
                                                                          kind=expander_pb2.EMBED_KIND_QUERY), timeout=600)
                for arm in ARMS:
                    ranks[arm][name] = {}
                for row, vec in zip(rows, embedded.vectors):
                    qid, golds = str(row["id"]), [_squeeze(g) for g in gold_passages(row)]
                    search = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=TOP_K, collections=[collection]),
                                               timeout=PATIENT_SECONDS)
                    ranks["graphmesh"][name][qid] = first_gold([r.text for r in search.results], golds)
                    dense = np.argsort(-(vectors @ np.array(vec.values, dtype=np.float32)))[:DEPTH]
                    query_tokens = tokens(row["query"])
                    if query_tokens:
                        docs, scores = index.retrieve([query_tokens], k=min(DEPTH, len(chunk_texts)), show_progress=False)
                        lexical = [int(d) for d, s in zip(docs[0], scores[0]) if s > 0]
                    else:
                        lexical = []
                    for arm, order in (("naive", rrf(lexical, dense)), ("bm25", lexical), ("dense", list(dense))):
                        ranks[arm][name][qid] = first_gold([chunk_texts[i] for i in order], golds)
                print(f"{name}: {len(rows)} questions, {len(chunk_texts)} chunks", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(ranks, ensure_ascii=False, indent=1), encoding="utf-8")
    report(ranks)


def _means(r: dict[str, int | None]) -> str:
    return " / ".join(f"{np.mean([rank_metric(m, v) for v in r.values()]):.3f}" for m in RANK_METRICS)


def report(ranks: dict[str, dict[str, dict[str, int | None]]]) -> None:
    """Per set, the trial sets pooled and all pooled: each arm's R@1 / R@10 / MRR@10 and GraphMesh minus the others."""
    groups = {name: [name] for name in SETS}
    groups["trial sets pooled"] = [n for n in SETS if n not in DEV_SETS and n not in KEPT_BACK]
    if KEPT_BACK:
        groups["kept back pooled"] = list(KEPT_BACK)
    groups["all pooled"] = list(SETS)
    print("\nR@1 / R@10 / MRR@10; GraphMesh minus each arm, 95% paired bootstrap interval, permutation p")
    for group, names in groups.items():
        per_arm = {arm: pooled({n: ranks[arm][n] for n in names}) for arm in ARMS}
        print(f"{group} (n={len(per_arm['graphmesh'])}): " + "  ".join(f"{arm} {_means(per_arm[arm])}" for arm in ARMS))
        for arm in ARMS[1:]:
            deltas = compare_ranks(per_arm[arm], per_arm["graphmesh"])
            print(f"    minus {arm}: " + "  ".join(
                f"{m} {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}] p {d.p_value:.3f}" for m, d in deltas.items()))
