"""Training and cross-validating the LambdaMART ranker (issue 23) over dumped
candidate lists (bench/ltr_study.py dump).

A question is {"id", "set", "gold": [ids], "keywords": [...],
"candidates": [dump records in today's fused order]}. A candidate is
relevant (label 1) when its document id, or its title, is a gold label, as
``graphmesh eval`` counts them; ranks count distinct documents (the
evaluation's keys), so LTR and today's order are scored alike.

    python -m services.cli.ltr_training train --out models/ltr/law_zh.txt
        [--dir bench/results/ltr] [--sets scenario,consult,facts]

Hyperparameters are fixed (``PARAMS``, ``ROUNDS``), chosen before any
figure was seen and not tuned: the study reports them as they are.
"""
from __future__ import annotations

import argparse
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from services.cli.significance import RANK_METRICS, compare_ranks, rank_metric
from services.judge import core as metrics
from services.reranker.ltr import FeatureSpec, LtrCandidate, features

#: LightGBM LambdaMART settings (fixed a priori, not tuned on any figure).
PARAMS: dict = {
    "objective": "lambdarank", "metric": "ndcg", "eval_at": [1, 10],
    "num_leaves": 15, "learning_rate": 0.05, "min_data_in_leaf": 20,
    "feature_fraction": 0.8, "bagging_fraction": 0.8, "bagging_freq": 1,
    "lambdarank_truncation_level": 30, "lambda_l2": 1.0,
    "num_threads": 1, "deterministic": True, "force_row_wise": True, "verbose": -1,
}
#: Boosting rounds.
ROUNDS = 200
#: Seed of the fitting / held-back split (fixed: the held-back halves must
#: stay the same questions whatever fold seed a study uses).
HOLDOUT_SEED = 23


def question_key(question: Mapping) -> str:
    """"<set>/<id>": a question's id across pooled sets."""
    return f"{question.get('set', '')}/{question['id']}"


def candidates_of(question: Mapping) -> list[LtrCandidate]:
    """The question's candidates (dump records) in today's fused order."""
    return [LtrCandidate.from_record(r) for r in question.get("candidates", ())]


def labels(question: Mapping) -> list[int]:
    """1 per candidate whose document id or title is gold, else 0."""
    gold = set(map(str, question.get("gold", ())))
    return [int(r.get("document_id") in gold or r.get("title") in gold) for r in question.get("candidates", ())]


def ranking_keys(records: Sequence[Mapping], gold: set[str]) -> list[str]:
    """Distinct evaluation keys of ``records`` in order: the title when it is
    a gold label, else the document id (services.cli.evaluate.result_keys)."""
    return metrics.dedupe([r["title"] if r.get("title") in gold else (r.get("document_id") or r["id"]) for r in records])


def first_gold(question: Mapping, order: Sequence[int] | None = None) -> int | None:
    """1-based rank of the first gold document with the candidates in
    ``order`` (indices; default today's fused order); None when no gold is
    among them."""
    records = question.get("candidates", [])
    if order is not None:
        records = [records[i] for i in order]
    gold = set(map(str, question.get("gold", ())))
    return metrics.first_gold_rank(ranking_keys(records, gold), gold)


def matrix(questions: Sequence[Mapping], spec: FeatureSpec = FeatureSpec()) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(features, labels, group sizes) of ``questions``, questions in order;
    questions without candidates are skipped (group sizes > 0)."""
    rows: list[list[float]] = []
    ys: list[int] = []
    groups: list[int] = []
    for q in questions:
        cands = candidates_of(q)
        if not cands:
            continue
        rows += features(cands, q.get("keywords", ()), spec)
        ys += labels(q)
        groups.append(len(cands))
    width = len(spec.names)
    return np.asarray(rows, dtype=np.float64).reshape(-1, width), np.asarray(ys, dtype=np.int32), groups


def train(questions: Sequence[Mapping], params: Mapping | None = None, rounds: int = ROUNDS,
          spec: FeatureSpec = FeatureSpec()):
    """A lightgbm.Booster trained on ``questions``. Questions with no gold
    among their candidates carry no pairwise signal and are left out.

    Raises:
        ValueError: no question has a gold candidate.
    """
    import lightgbm

    useful = [q for q in questions if any(labels(q))]
    if not useful:
        raise ValueError("no question has a gold document among its candidates")
    x, y, groups = matrix(useful, spec)
    data = lightgbm.Dataset(x, y, group=groups, feature_name=spec.names, free_raw_data=True)
    return lightgbm.train(dict(params or PARAMS), data, num_boost_round=rounds)


def ltr_order(booster, question: Mapping, spec: FeatureSpec | None = None) -> list[int]:
    """Candidate indices best first by ``booster``'s score (stable: ties keep
    the fused order)."""
    cands = candidates_of(question)
    if not cands:
        return []
    spec = spec or FeatureSpec.from_names(booster.feature_name())
    scores = booster.predict(np.asarray(features(cands, question.get("keywords", ()), spec)), num_threads=1)
    return sorted(range(len(cands)), key=lambda i: -scores[i])


def folds_of(questions: Sequence[Mapping], k: int, seed: int) -> list[int]:
    """A fold number in [0, k) per question, by a seeded hash of its key, so
    a question keeps its fold whatever else is in the pool."""
    return [int(hashlib.sha256(f"{seed}:{question_key(q)}".encode()).hexdigest(), 16) % k for q in questions]


def holdout_split(questions: Sequence[Mapping], seed: int = HOLDOUT_SEED) -> tuple[list[Mapping], list[Mapping]]:
    """(fitting half, held-back half) of ``questions`` by a seeded hash of
    each key (about half each, per set)."""
    fit, held = [], []
    for q in questions:
        bit = int(hashlib.sha256(f"holdout-{seed}:{question_key(q)}".encode()).hexdigest(), 16) % 2
        (held if bit else fit).append(q)
    return fit, held


def cross_validate(questions: Sequence[Mapping], k: int = 5, seed: int = 23,
                   params: Mapping | None = None, rounds: int = ROUNDS) -> dict[str, int | None]:
    """Out-of-fold first-gold ranks (question key -> rank) of LTR: each fold
    is ranked by a model trained on the other k - 1 folds."""
    fold = folds_of(questions, k, seed)
    out: dict[str, int | None] = {}
    for f in range(k):
        booster = train([q for q, g in zip(questions, fold) if g != f], params, rounds)
        for q, g in zip(questions, fold):
            if g == f:
                out[question_key(q)] = first_gold(q, ltr_order(booster, q))
    return out


def _means(ranks: Mapping[str, int | None]) -> dict[str, float]:
    return {m: round(float(np.mean([rank_metric(m, r) for r in ranks.values()])), 4) for m in RANK_METRICS}


def compare_table(baseline: Mapping[str, int | None], ltr: Mapping[str, int | None], sets: Sequence[str]) -> dict:
    """Per set and pooled: n, today's and LTR's R@1 / R@10 / MRR@10, and
    LTR minus today with its paired bootstrap interval (question keys are
    "<set>/<id>")."""
    table: dict = {}
    for name in [*sets, "pooled"]:
        keys = [k for k in baseline if name == "pooled" or k.startswith(f"{name}/")]
        a = {k: baseline[k] for k in keys}
        b = {k: ltr[k] for k in keys}
        table[name] = {"n": len(keys), "today": _means(a), "ltr": _means(b),
                       "ltr_minus_today": {m: d.as_dict() for m, d in compare_ranks(a, b).items()}}
    return table


def print_table(title: str, table: Mapping) -> None:
    """Prints ``compare_table``'s figures."""
    print(f"\n== {title}: R@1 / R@10 / MRR@10, LTR - today [95% paired bootstrap] p")
    for name, row in table.items():
        fmt = " / ".join(f"{row['today'][m]:.3f}" for m in RANK_METRICS)
        ltr = " / ".join(f"{row['ltr'][m]:.3f}" for m in RANK_METRICS)
        print(f"  {name:9s} n={row['n']:3d}  today {fmt}   ltr {ltr}")
        for m in RANK_METRICS:
            d = row["ltr_minus_today"][m]
            print(f"      {m:9s} {d['delta']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] p={d['p_value']:.4f}"
                  f"{'  *' if d['significant'] else ''}")


def study(dumps: Mapping[str, Sequence[Mapping]], folds: int = 5, seed: int = 23) -> dict:
    """The LTR study over dumped dev sets (set name -> questions): k-fold
    cross-validation over the pooled sets, then the held-back check (a
    model trained on the fitting halves, scored on the held-back halves,
    split by HOLDOUT_SEED), then leave one set out. ``seed`` assigns the
    folds. Prints and returns the figures (a JSON-ready dict)."""
    questions = [{**q, "set": name} for name, qs in dumps.items() for q in qs]
    sets = list(dumps)
    baseline = {question_key(q): first_gold(q) for q in questions}
    pool_recall = _means({k: (1 if r is not None else None) for k, r in baseline.items()})["recall@1"]
    oof = cross_validate(questions, folds, seed)
    cv = compare_table(baseline, oof, sets)
    print(f"{len(questions)} questions, {np.mean([len(q['candidates']) for q in questions]):.1f} candidates each, "
          f"gold in the candidate list for {pool_recall:.3f}")
    print_table(f"{folds}-fold cross-validation over the pooled dev sets (out of fold)", cv)

    fit, held = holdout_split(questions)
    booster = train(fit)
    held_ltr = {question_key(q): first_gold(q, ltr_order(booster, q)) for q in held}
    held_table = compare_table({question_key(q): baseline[question_key(q)] for q in held}, held_ltr, sets)
    print_table(f"held-back halves (model trained on the {len(fit)} fitting-half questions only)", held_table)
    # Leave one set out: trained on the other sets only, scored on this one
    # (does the ranker carry over to a kind of question it has not seen?).
    loso: dict[str, int | None] = {}
    for name in sets:
        other = train([q for q in questions if q["set"] != name])
        loso.update({question_key(q): first_gold(q, ltr_order(other, q)) for q in questions if q["set"] == name})
    loso_table = compare_table(baseline, loso, sets)
    print_table("leave one set out (model trained on the other two sets)", loso_table)
    importance = dict(zip(booster.feature_name(), booster.feature_importance("gain").round(1).tolist()))
    top = dict(sorted(importance.items(), key=lambda kv: -kv[1])[:15])
    print("\nfeature gain (fitting-half model), top 15:", top)
    return {"params": PARAMS, "rounds": ROUNDS, "folds": folds, "seed": seed, "holdout_seed": HOLDOUT_SEED, "n": len(questions),
            "gold_in_candidates": pool_recall, "cv": cv,
            "held_back": {"n_fit": len(fit), "n_held": len(held), "table": held_table}, "leave_one_set_out": loso_table,
            "feature_gain_top": top}


def main(argv: Sequence[str] | None = None) -> None:
    """``train``: fits the model on every dev question of the dumps and
    writes it (LightGBM text format) to ``--out``."""
    import gzip
    import json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--dir", type=Path, default=Path("bench/results/ltr"))
    t.add_argument("--sets", default="scenario,consult,facts")
    args = parser.parse_args(argv)
    questions = []
    for name in args.sets.split(","):
        with gzip.open(args.dir / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            questions += [{**json.loads(line), "set": name} for line in f if line.strip()]
    booster = train(questions)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(args.out))
    print(f"trained on {len(questions)} questions ({sum(1 for q in questions if any(labels(q)))} with a gold candidate), "
          f"{ROUNDS} rounds -> {args.out}")


if __name__ == "__main__":
    main()
