"""Where the gold article is packed in the context, beside where Search
ranks it (a probe, not a test): per law dev set, how many questions have
the gold first in the results and first in the packed context, in the top
three of each, and the source of the first result.

    python bench/packing_position.py [--sets scenario consult facts]

Against a running stack (``graphmesh up``, law corpus in). Run it once per
``GRAPHMESH_FUSER_PACK_ORDER`` (rank, the default; source) to see what the
packing order changes: the extractive answer quotes the first three packed
texts and a small LLM cites mostly [1].
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

from bench.abstention_fit import SETS  # noqa: E402
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli import evaluate  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.common.packed_context import source_label  # noqa: E402


async def positions(stub, rows: list[dict]) -> Counter:
    counts: Counter = Counter()
    for row in rows:
        reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=10), timeout=60)
        gold = {str(g) for g in row.get("gold", [])}
        packed = [label for label, _ in evaluate.split_context(reply.context, evaluate.result_labels(reply))]
        counts["questions"] += 1
        if reply.results:
            counts[f"first result's source {reply.results[0].source}"] += 1
        at = next((i for i, c in enumerate(reply.results) if (c.document_id or c.id) in gold), None)
        if at is None:
            continue
        label = source_label(reply.results[at])  # the packed header of a candidate: title and headings
        packed_at = packed.index(label) if label in packed else None
        counts["gold ranked first"] += at == 0
        counts["gold packed first"] += packed_at == 0
        counts["gold ranked in the top three"] += at < 3
        counts["gold packed in the first three"] += packed_at is not None and packed_at < 3
    return counts


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="*", default=["scenario", "consult", "facts"])
    args = parser.parse_args()
    stub = gateway_pb2_grpc.GatewayServiceStub(channel(MeshAddresses().gateway_addr))
    for name in args.sets:
        counts = await positions(stub, evaluate.load_dataset(SETS[name]))
        print(name, json.dumps(dict(sorted(counts.items())), ensure_ascii=False), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
