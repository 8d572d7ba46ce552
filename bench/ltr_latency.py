"""Cost of the ltr scorer on one list of 100 candidates, beside today's
weighted fusion of the same list, in the same run (not a test).

Lists come from the candidate dumps (bench/ltr_study.py dump): each
question's list, topped up to 100 with the next questions' candidates. For
each list, best of ``--repeat`` timings (one core, no threads) of:

- fusion: services.fuser.core.weighted_scores + rank over the 100 items
  (the fuser's own work today, default channel weights; the baseline);
- features: services.reranker.ltr.features alone;
- ltr: LtrRanker.score (features + LightGBM predict);
- ltr_from_proto: LtrScorer.score_list from Candidate messages (what the
  reranker service does per request, serialisation aside).

    python bench/ltr_latency.py [--lists 200] [--repeat 5] [--model models/ltr/law_zh.txt]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import save  # noqa: E402
from ltr_study import SETS, load_dump  # noqa: E402

from graphmesh.common.v1 import types_pb2  # noqa: E402
from services.fuser import core  # noqa: E402
from services.fuser.convert import candidate_to_item  # noqa: E402
from services.gateway.config import DEFAULT_WEIGHTS  # noqa: E402
from services.reranker.ltr import DEFAULT_MODEL_FILE, LtrCandidate, LtrRanker, LtrScorer, features  # noqa: E402

SIZE = 100


def lists_of(questions: list[dict], count: int) -> list[tuple[list[dict], list[str]]]:
    """``count`` lists of SIZE candidate records (with the first question's keywords)."""
    pool = [(c, q) for q in questions for c in q["candidates"]]
    out = []
    start = 0
    for q in questions[:count]:
        records = [dict(c, id=f"{i}:{c['id']}", fused_rank=i + 1)
                   for i, (c, _) in enumerate(pool[start:start + SIZE])]
        start = (start + len(q["candidates"])) % max(1, len(pool) - SIZE)
        out.append((records, q.get("keywords", [])))
    return out


def to_proto(record: dict) -> types_pb2.Candidate:
    return types_pb2.Candidate(
        id=record["id"], document_id=record["document_id"], title=record["title"], heading_path=record["heading_path"],
        text=record["text"], fused_score=record["fused_score"], metadata=record.get("metadata", {}),
        channel_scores=[types_pb2.ChannelScore(channel=n, score=s, rank=r) for n, s, r in record["channels"]])


def best_of(repeat: int, fn) -> float:
    """Best wall time of ``repeat`` calls, milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lists", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL_FILE)
    args = parser.parse_args()
    questions = [q for name in SETS for q in load_dump(name)]
    ranker = LtrRanker(args.model)
    scorer = LtrScorer(args.model)
    scorer.load()
    timings: dict[str, list[float]] = {"fusion": [], "features": [], "ltr": [], "ltr_from_proto": []}
    for records, keywords in lists_of(questions, args.lists):
        cands = [LtrCandidate.from_record(r) for r in records]
        protos = [to_proto(r) for r in records]
        items = [candidate_to_item(p) for p in protos]
        timings["fusion"].append(best_of(args.repeat, lambda: core.rank(items, core.weighted_scores(items, DEFAULT_WEIGHTS), SIZE)))
        timings["features"].append(best_of(args.repeat, lambda: features(cands, keywords, ranker.spec)))
        timings["ltr"].append(best_of(args.repeat, lambda: ranker.score(cands, keywords)))
        timings["ltr_from_proto"].append(best_of(args.repeat, lambda: scorer.score_list(protos, keywords)))
    report = {"candidates_per_list": SIZE, "lists": len(timings["ltr"]), "repeat": args.repeat, "model": str(args.model),
              "ms": {k: {q: round(v, 3) for q, v in percentiles_ms(v).items()} for k, v in timings.items()}}
    print(f"{report['lists']} lists of {SIZE} candidates, best of {args.repeat}, milliseconds (p50 / p95 / p99):")
    for name, p in report["ms"].items():
        print(f"  {name:15s} {p['p50']:.3f} / {p['p95']:.3f} / {p['p99']:.3f}")
    save("ltr_latency", report)


def percentiles_ms(values: list[float]) -> dict[str, float]:
    """p50/p95/p99/mean of ``values`` to 0.001 ms (bench._common rounds to 0.1)."""
    s = sorted(values)
    return {"p50": s[len(s) // 2], "p95": s[min(len(s) - 1, int(0.95 * len(s)))],
            "p99": s[min(len(s) - 1, int(0.99 * len(s)))], "mean": sum(s) / len(s)}


if __name__ == "__main__":
    main()
