"""LTR with some features zeroed (not a test): 5-fold and leave-one-set-out
MRR@10 deltas against today's fused order, over the dumps of
bench/ltr_study.py.

    python bench/ltr_ablation.py list_size,query_keywords
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ltr_study import SETS, load_dump  # noqa: E402

from services.cli import ltr_training as training  # noqa: E402
from services.reranker import ltr  # noqa: E402


def main() -> None:
    drop = sys.argv[1].split(",")
    names = ltr.FeatureSpec().names
    columns = [names.index(d) for d in drop]
    original = ltr.features

    def zeroed(cands, keywords=(), spec=ltr.FeatureSpec()):
        rows = original(cands, keywords, spec)
        for row in rows:
            for i in columns:
                row[i] = 0.0
        return rows

    training.features = zeroed
    questions = [{**q, "set": n} for n in SETS for q in load_dump(n)]
    base = {training.question_key(q): training.first_gold(q) for q in questions}
    oof = training.cross_validate(questions, 5, 23)
    loso: dict = {}
    for name in SETS:
        booster = training.train([q for q in questions if q["set"] != name])
        loso.update({training.question_key(q): training.first_gold(q, training.ltr_order(booster, q))
                     for q in questions if q["set"] == name})
    for title, ranks in (("5-fold", oof), ("leave one set out", loso)):
        table = training.compare_table(base, ranks, list(SETS))
        print(f"{title}, zeroed {drop}: MRR@10 delta [95% interval]")
        for name, row in table.items():
            d = row["ltr_minus_today"]["mrr@10"]
            print(f"  {name:9s} {d['delta']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")


if __name__ == "__main__":
    main()
