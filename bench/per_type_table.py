"""Per question type table (not a test): recall@1, recall@10 and MRR@10 of
saved eval runs (``graphmesh eval --out RUN.json``) split by the question
type the expander detected, as markdown.

    python bench/per_type_table.py RUN.json [RUN.json ...]

Each row is one (run, question type): the run's dataset name, the type, the
profile it was searched with, how many queries, and the metrics over them.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from services.judge import core as metrics  # noqa: E402


def rows_of(artifact: dict) -> list[tuple[str, str, int, float, float, float]]:
    """(question type, profile, n, recall@1, recall@10, mrr@10) per type."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in artifact["rows"]:
        groups[row.get("question_type") or "unreported"].append(row)
    out = []
    for kind, rows in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        n = len(rows)

        def hit(r: dict, k: int) -> float:
            return 1.0 if r["first_gold_rank"] is not None and r["first_gold_rank"] <= k else 0.0

        profile = Counter(r.get("profile", "") for r in rows).most_common(1)[0][0]
        out.append((kind, profile, n, sum(hit(r, 1) for r in rows) / n, sum(hit(r, 10) for r in rows) / n,
                    sum(metrics.mrr_at(r["ranked"], set(r["gold"]), 10) for r in rows) / n))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    print("| dev set | question type | profile | n | recall@1 | recall@10 | mrr@10 |")
    print("|---|---|---|---|---|---|---|")
    for path in args.runs:
        artifact = json.loads(Path(path).read_text(encoding="utf-8"))
        name = Path(artifact["dataset"]["path"]).stem.removeprefix("queries-").removesuffix("-dev")
        for kind, profile, n, r1, r10, mrr in rows_of(artifact):
            print(f"| {name} | {kind} | {profile} | {n} | {r1:.3f} | {r10:.3f} | {mrr:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
