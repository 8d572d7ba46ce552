"""Graph channel sweep (benchmark, not a test): how the document-graph
channels' fusion weights change quality, per dev set.

One pass through the running services per query collects every channel:
the expander, retriever_pg's Retrieve, retriever_graph's Retrieve (its
lookup channels; full text, headings and neighbours off) and its Related
(cites, version, PPR) seeded by the top ``--seeds`` of an offline fusion
with the default weights. The lists are saved (``--save``), then fused
offline with services.fuser.core for every weight combination, so a sweep
costs one pass of retrieval.

    python bench/graph_sweep.py --dataset ../shared/data/law-zh/queries-facts-dev.jsonl --save facts.pkl
    python bench/graph_sweep.py --load facts.pkl --grid 'graph.offence=0,1,2,4'
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc  # noqa: E402
from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc  # noqa: E402
from services.cli.evaluate import load_dataset  # noqa: E402
from services.common import names  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.fuser import core  # noqa: E402
from services.fuser.convert import candidate_to_item  # noqa: E402
from services.gateway.config import DEFAULT_WEIGHTS  # noqa: E402
from services.judge import core as metrics  # noqa: E402

_OFF_FIRST = [names.GRAPH_HEADING, names.GRAPH_FULLTEXT, names.GRAPH_NEIGHBOUR]


async def collect(dataset: list[dict], top_k: int, seeds: int, concurrency: int) -> list[tuple[dict, list]]:
    """(row, [pg items, graph items, related items]) per query."""
    addresses = MeshAddresses()
    expander = expander_pb2_grpc.ExpanderServiceStub(channel(addresses.expander_addr))
    pg = retriever_pb2_grpc.RetrieverServiceStub(channel(addresses.retriever_pg_addr))
    graph = retriever_pb2_grpc.RetrieverServiceStub(channel(addresses.retriever_graph_addr))
    gate = asyncio.Semaphore(concurrency)

    async def one(row: dict):
        async with gate:
            try:
                expanded = await expander.Expand(expander_pb2.ExpandRequest(query=row["query"], embed=True), timeout=120)
            except grpc.aio.AioRpcError as err:  # e.g. over the query length limit: counted as a miss
                print(f"query {row['id']}: {err.code().name}", file=sys.stderr)
                return row, [], "error"
            request = retriever_pb2.RetrieveRequest(
                query=expanded.normalized_query, keywords=expanded.keywords, query_embedding=expanded.embedding,
                top_k=top_k, disabled_channels=_OFF_FIRST)
            replies = await asyncio.gather(pg.Retrieve(request, timeout=120), graph.Retrieve(request, timeout=120))
            lists = [[candidate_to_item(c) for c in reply.candidates] for reply in replies]
            ranked = fuse(lists, {**DEFAULT_WEIGHTS})[:seeds]
            related = []
            if ranked:
                reply = await graph.Related(retriever_pb2.RelatedRequest(
                    query=expanded.normalized_query, keywords=expanded.keywords, top_k=top_k,
                    seeds=[retriever_pb2.Seed(document_id=it.document_id, chunk_id=it.id, score=it.fused)
                           for it in ranked]), timeout=120)
                related = [candidate_to_item(c) for c in reply.candidates]
        return row, [*lists, related], expander_pb2.QuestionType.Name(expanded.question_type)

    return await asyncio.gather(*(one(r) for r in dataset))


def _copy(item: core.Item) -> core.Item:
    return core.Item(item.id, item.document_id, item.title, item.heading_path, item.text, item.source, item.ordinal,
                     [core.Scored(s.channel, s.score, s.rank, s.evidence) for s in item.scores])


def fuse(lists: list[list[core.Item]], weights: dict[str, float]) -> list[core.Item]:
    """Weighted fusion of ``lists`` (channels not in ``weights`` weigh 0)."""
    items = core.merge([[_copy(i) for i in lst] for lst in lists])
    items = [it for it in items if any(weights.get(s.channel, 0) > 0 for s in it.scores)]
    return core.rank(items, core.weighted_scores(items, weights), 50)


def evaluate(collected, weights: dict[str, float]) -> dict[str, float]:
    totals = {"recall@1": 0.0, "recall@10": 0.0, "mrr@10": 0.0}
    for row, lists, _ in collected:
        ranked = metrics.dedupe([it.document_id for it in fuse(lists, weights)])
        gold = {str(g) for g in row["gold"]}
        rank = metrics.first_gold_rank(ranked, gold)
        totals["recall@1"] += rank == 1
        totals["recall@10"] += rank is not None and rank <= 10
        totals["mrr@10"] += metrics.mrr_at(ranked, gold, 10)
    return {k: round(v / len(collected), 4) for k, v in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset")
    parser.add_argument("--save")
    parser.add_argument("--load")
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--grid", action="append", default=[],
                        help="CHANNEL=w1,w2,... (repeat); other channels keep DEFAULT_WEIGHTS")
    args = parser.parse_args()
    if args.load:
        collected = pickle.loads(Path(args.load).read_bytes())
    else:
        collected = asyncio.run(collect(load_dataset(Path(args.dataset)), args.top_k, args.seeds, args.concurrency))
        if args.save:
            Path(args.save).write_bytes(pickle.dumps(collected))
    base = {**DEFAULT_WEIGHTS}
    for off in (names.GRAPH_CITES, names.GRAPH_VERSION, names.GRAPH_PPR):
        base[off] = 0.0
    grid = [(g.split("=")[0], [float(x) for x in g.split("=")[1].split(",")]) for g in args.grid]
    print("| " + " | ".join(c for c, _ in grid) + " | recall@1 | recall@10 | mrr@10 |")
    print("|---" * (len(grid) + 3) + "|")
    for combo in itertools.product(*(values for _, values in grid)):
        weights = {**base, **{c: w for (c, _), w in zip(grid, combo)}}
        result = evaluate(collected, weights)
        print("| " + " | ".join(str(w) for w in combo) + f" | {result['recall@1']} | {result['recall@10']} | {result['mrr@10']} |",
              flush=True)


if __name__ == "__main__":
    main()
