"""What reading the stored chunk vector costs retriever_pg per channel query
(issue 27): each channel's store query with the embedding column
(``with_embeddings=True``, what every query did before RetrievalQuery
carried the flag) and without it (``NULL::vector``, today's default when the
gateway does not ask for vectors), on the same questions, alternating arms
over several rounds so both see the same machine load.

Against a running stack's PostgreSQL (``graphmesh up`` with the law corpus;
or ``--dsn``), the first ``--questions`` scenario dev questions, their
keywords and query vectors from the stack's expander:

    python bench/store_vector_column.py [--questions 40] [--rounds 5]

Prints, per channel and arm, the p50 wall time of one store call and this
process's CPU time per call (asyncpg's decoding happens here; PostgreSQL's
own work is in its backend and is not counted), and the rows' payload.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import SHARED_DATA, save, stack_dsn  # noqa: E402

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.retriever_pg.store import PgStore  # noqa: E402


async def run(args) -> dict:
    use_local_mesh_token()
    rows = [json.loads(line) for line in (SHARED_DATA / "law-zh" / "queries-scenario-dev.jsonl")
            .read_text(encoding="utf-8").splitlines() if line.strip()][: args.questions]
    async with channel(MeshAddresses().expander_addr) as ch:
        expander = expander_pb2_grpc.ExpanderServiceStub(ch)
        queries = []
        for row in rows:
            x = await expander.Expand(expander_pb2.ExpandRequest(query=row["query"], embed=True), timeout=60)
            queries.append((list(x.keywords), list(x.embedding)))
    store = PgStore(stack_dsn(args.dsn), len(queries[0][1]))
    await store.open()
    channels = {
        "pg.vector": lambda kw, vec, flag: store.vector_search(vec, args.top_k, with_embeddings=flag),
        "pg.keyword": lambda kw, vec, flag: store.keyword_search(kw, args.top_k, with_embeddings=flag),
    }
    figures: dict = {}
    try:
        for name, call in channels.items():
            wall = {True: [], False: []}
            cpu = {True: [], False: []}
            for _ in range(args.rounds):
                for flag in (True, False):
                    for kw, vec in queries:
                        w0, c0 = time.perf_counter(), time.process_time()
                        await call(kw, vec, flag)
                        wall[flag].append((time.perf_counter() - w0) * 1000)
                        cpu[flag].append((time.process_time() - c0) * 1000)
            figures[name] = {("with" if flag else "without") + "_vectors": {
                "wall_p50_ms": round(statistics.median(wall[flag]), 3),
                "cpu_ms_per_call": round(statistics.fmean(cpu[flag]), 3)} for flag in (True, False)}
            with_, without = figures[name]["with_vectors"], figures[name]["without_vectors"]
            print(f"{name}: with vectors p50 {with_['wall_p50_ms']:.2f} ms, CPU {with_['cpu_ms_per_call']:.3f} ms/call; "
                  f"without p50 {without['wall_p50_ms']:.2f} ms, CPU {without['cpu_ms_per_call']:.3f} ms/call "
                  f"({args.questions} questions x {args.rounds} rounds, top_k {args.top_k})", flush=True)
    finally:
        await store.close()
    return {"args": vars(args), "channels": figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--dsn", default="")
    args = parser.parse_args()
    save("store_vector_column", asyncio.run(run(args)))


if __name__ == "__main__":
    main()
