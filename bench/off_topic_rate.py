"""How often the citation verifier flags a kept sentence as off-topic
(issue 29 item 2), on the law dev sets through a running stack's Answer
(extractive unless the stack has an LLM): per set, the answers with any
flagged sentence, and the flagged share of kept (supported or re-attributed)
citation checks.

    python bench/off_topic_rate.py scenario,consult,facts [--limit N]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402

KEPT = (gateway_pb2.CITATION_OUTCOME_SUPPORTED, gateway_pb2.CITATION_OUTCOME_REATTRIBUTED)


async def rates(sets: list[str], limit: int, address: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = gateway_pb2_grpc.GatewayServiceStub(channel)
        for name in sets:
            path = REPO.parent / "shared" / "data" / "law-zh" / f"queries-{name}-dev.jsonl"
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:limit or None]
            answers = flagged_answers = kept = flagged = 0
            for row in rows:
                reply = await stub.Answer(gateway_pb2.AnswerRequest(query=row["query"], top_k=5), timeout=120)
                if reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED:
                    continue
                answers += 1
                checks = [c for c in reply.citation_checks if c.outcome in KEPT]
                kept += len(checks)
                flagged += sum(c.off_topic for c in checks)
                flagged_answers += reply.off_topic_count > 0
            print(f"{name}: {answers} answers, {flagged_answers} with an off-topic sentence "
                  f"({flagged_answers / max(1, answers):.3f}); {flagged} of {kept} kept sentences flagged "
                  f"({flagged / max(1, kept):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", help="comma-separated law dev sets: scenario, consult, facts")
    parser.add_argument("--limit", type=int, default=0, help="first N questions of each set (0 = all)")
    parser.add_argument("--address", default="127.0.0.1:50051")
    args = parser.parse_args()
    asyncio.run(rates(args.sets.split(","), args.limit, args.address))


if __name__ == "__main__":
    main()
