"""Learning to rank over the fused candidate lists (issue 23, item 2; not a test).

Two steps:

    graphmesh up   # the law corpus in (make demo --keep-up)
    python bench/ltr_study.py dump [--sets scenario,consult,facts] [--concurrency 2]
    python bench/ltr_study.py study [--folds 5]

``dump`` runs every dev question through the running gateway's Search
(defaults, top_k 100: every candidate the default pipeline fused, up to 100)
and writes each question's candidate list, in today's fused order, with
every channel's score and rank, to bench/results/ltr/<set>.jsonl.gz.

``study`` trains LightGBM LambdaMART (services/cli/ltr_training.py) with
k-fold cross-validation over the pooled dev sets (folds by question), and
prints per set and pooled R@1 / R@10 / MRR@10 of the out-of-fold LTR order
beside today's fused order, with paired bootstrap 95% intervals and
permutation p-values (services/cli/significance.py). Then the held-back
check (see ``--holdout``): a model trained on the fitting halves only,
scored once on the held-back halves.
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import RESULTS, SHARED_DATA, save  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.evaluate import load_dataset  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402

DUMP_DIR = RESULTS / "ltr"
SETS = ("scenario", "consult", "facts")


def candidate_record(c, rank: int) -> dict:
    """The JSON form of one Search result (a types_pb2.Candidate) at fused ``rank``."""
    return {
        "id": c.id, "document_id": c.document_id, "title": c.title, "heading_path": list(c.heading_path),
        "text": c.text, "metadata": dict(c.metadata), "fused_score": c.fused_score, "fused_rank": rank,
        "channels": [[s.channel, s.score, s.rank] for s in c.channel_scores],
    }


async def dump_set(address: str, name: str, concurrency: int, limit: int | None) -> Path:
    """Searches every question of the ``name`` dev set (top_k 100) and writes
    the candidate lists; returns the file written."""
    dataset = load_dataset(SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl", limit)
    ch = channel(address)
    stub = gateway_pb2_grpc.GatewayServiceStub(ch)
    gate = asyncio.Semaphore(concurrency)
    out: list[dict | None] = [None] * len(dataset)

    async def one(i: int, row: dict) -> None:
        async with gate:
            started = time.perf_counter()
            try:
                reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=100), timeout=180)
            except Exception as err:  # noqa: BLE001 - recorded, the question is left without candidates
                out[i] = {"id": str(row["id"]), "set": name, "query": row["query"], "gold": [str(g) for g in row["gold"]],
                          "error": str(err)[:300], "candidates": []}
                return
            out[i] = {
                "id": str(row["id"]), "set": name, "query": row["query"], "gold": [str(g) for g in row["gold"]],
                "keywords": list(reply.query_info.keywords), "question_type": reply.query_info.question_type,
                "profile": reply.query_info.profile, "latency_ms": round((time.perf_counter() - started) * 1000, 1),
                "degraded": list(reply.degraded),
                "candidates": [candidate_record(c, r) for r, c in enumerate(reply.results, start=1)],
            }

    try:
        await asyncio.gather(*(one(i, r) for i, r in enumerate(dataset)))
    finally:
        await ch.close()
    DUMP_DIR.mkdir(parents=True, exist_ok=True)
    path = DUMP_DIR / f"{name}.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for rec in out:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    errors = sum(1 for r in out if r and r.get("error"))
    print(f"{name}: {len(out)} questions, {errors} errors, "
          f"{sum(len(r['candidates']) for r in out) / max(1, len(out)):.1f} candidates per question -> {path}", flush=True)
    return path


def load_dump(name: str, directory: Path = DUMP_DIR) -> list[dict]:
    """The dumped questions of set ``name`` (see ``dump_set``)."""
    with gzip.open(directory / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--sets", default=",".join(SETS))
    d.add_argument("--concurrency", type=int, default=2)
    d.add_argument("--limit", type=int, default=0)
    s = sub.add_parser("study")
    s.add_argument("--folds", type=int, default=5)
    s.add_argument("--seed", type=int, default=23)
    s.add_argument("--dir", type=Path, default=DUMP_DIR)
    args = parser.parse_args()
    if args.command == "dump":
        use_local_mesh_token()
        address = MeshAddresses().gateway_addr
        for name in args.sets.split(","):
            asyncio.run(dump_set(address, name, args.concurrency, args.limit or None))
        return
    from services.cli.ltr_training import study

    report = study({name: load_dump(name, args.dir) for name in SETS}, folds=args.folds, seed=args.seed)
    save("ltr_study", report)


if __name__ == "__main__":
    main()
