"""Would a lexical coverage signal make the generic pack's Chinese abstention
rule better on documents it was not fitted on? (study, not a test)

The rule (services/gateway/answer/abstention.py, fit "e5onnx" of
domains/generic/recipes.json) answers mostly by the best two pg.vector
cosines. A fresh user's trial found it answering questions whose words the
evidence does not hold: 员工生日有什么福利？ over an office's documents was
answered from a hotel-rate table (answerability 0.81). The signal tried here,
``coverage``: the share of the question's content words (QueryInfo.keywords,
two characters or more, a word inside a longer one dropped) found in the top
three results' title, heading path and text.

Offline, on the evidence bench/generic_abstention.py dumped
(bench/results/generic_abstention_evidence.jsonl): the rule is refitted the
way bench/abstention_fit.py fits (logistic regression, L2 1e-3, weights >= 0,
out-of-scope weighing half, the threshold maximising the lowest rate on the
fitting half) on a seeded half (seed 12) of the design documents and the
law files collections, with and without ``coverage``; both are scored on
the other half and on the company documents collection, which neither fit
sees (its 37 questions, its 14 workplace and 209 general out-of-scope
questions). Printed: each set's answer or abstention rate, and the paired
difference in correct decisions with a bootstrap 95% interval.

    python bench/abstention_coverage_study.py [--evidence FILE]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "gen" / "python")]

from abstention_fit import fit_logistic, split  # noqa: E402
from google.protobuf import json_format  # noqa: E402

from graphmesh.common.v1 import types_pb2  # noqa: E402
from services.gateway.answer import abstention  # noqa: E402

EVIDENCE = REPO / "bench" / "results" / "generic_abstention_evidence.jsonl"
WORKPLACE = REPO / "tests" / "quality" / "data" / "company_docs" / "out_of_scope.jsonl"
HELD_OUT_COLLECTION = "abstrial"
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
COVERAGE_RESULTS = 3


def coverage(keywords: list[str], results: list[dict], k: int = COVERAGE_RESULTS) -> float:
    """Share of the question's content words found in the top ``k`` results (0 without words)."""
    words = [_NON_WORD.sub("", w.lower()) for w in keywords]
    words = [w for w in words if len(w) >= 2 and not any(w != o and w in o for o in words)]
    if not words:
        return 0.0
    evidence = " ".join(_NON_WORD.sub("", " ".join([r.get("title", ""), *r.get("headingPath", []), r.get("text", "")]).lower())
                        for r in results[:k])
    return sum(w in evidence for w in words) / len(words)


def load(path: Path) -> dict[str, list[tuple[str, np.ndarray]]]:
    """{set: [(id, signals + coverage)]}; out-of-scope sets are "ood" (fitting collections),
    "held:ood-workplace" and "held:ood-general" (the held-out collection), its answerable set "held:trial"."""
    workplace = {json.loads(line)["query"] for line in WORKPLACE.open(encoding="utf-8")}
    out: dict[str, list[tuple[str, np.ndarray]]] = {}
    for line in path.open(encoding="utf-8"):
        record = json.loads(line)
        if "error" in record:
            continue
        results = [json_format.ParseDict(c, types_pb2.Candidate(), ignore_unknown_fields=True) for c in record["results"]]
        sig = abstention.signals(record["keywords"], results)
        row = np.array([*sig.vector(), coverage(record["keywords"], record["results"])], dtype=float)
        name = record["set"]
        if record["collection"] == HELD_OUT_COLLECTION:
            name = "held:" + (("ood-workplace" if record["query"] in workplace else "ood-general") if name == "ood" else name)
        out.setdefault(name, []).append((record["id"], row))
    return out


def fit(data: dict[str, list[np.ndarray]], columns: list[int]) -> tuple[np.ndarray, float]:
    """Weights over every column (0 outside ``columns``) and the bias with the threshold folded in."""
    names = list(data)
    x = np.vstack([np.array(data[s]) for s in names])
    y = np.concatenate([np.full(len(data[s]), 0.0 if s == "ood" else 1.0) for s in names])
    answerable = [s for s in names if s != "ood"]
    sample = np.concatenate([np.full(len(data[s]), 0.5 / len(data[s]) if s == "ood" else 0.5 / len(answerable) / len(data[s]))
                             for s in names]) * len(y)
    active = list(columns)
    while True:
        weights, bias = fit_logistic(x, y, active, sample)
        negative = [k for k in active if weights[k] < 0]
        if not negative:
            break
        active.remove(min(negative, key=lambda k: weights[k]))
    scores = {s: np.array(data[s]) @ weights + bias for s in names}
    best, cut = -1.0, 0.0
    for t in np.unique(np.concatenate(list(scores.values()))):
        low = min(float(np.mean(scores[s] < t)) if s == "ood" else float(np.mean(scores[s] >= t)) for s in names)
        if low > best:
            best, cut = low, float(t)
    lower = np.unique(np.concatenate(list(scores.values())))
    lower = lower[lower < cut]
    if len(lower):
        cut = (cut + lower[-1]) / 2
    return weights, bias - cut


def correct(rows: list[np.ndarray], weights: np.ndarray, bias: float, answerable: bool) -> np.ndarray:
    answered = np.array(rows) @ weights + bias >= 0.0
    return answered if answerable else ~answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evidence", type=Path, default=EVIDENCE)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    by_set = load(args.evidence)
    fitting, held = {}, {}
    for name, items in by_set.items():
        if name.startswith("held:"):
            held[name] = [row for _, row in items]
            continue
        first, second = split(items, args.seed)
        fitting[name], held[f"half:{name}"] = first, second
    base_cols = list(range(len(abstention.SIGNALS)))
    arms = {"signals": fit(fitting, base_cols), "signals + coverage": fit(fitting, base_cols + [len(abstention.SIGNALS)])}
    columns = [*abstention.SIGNALS, "coverage"]
    for arm, (weights, bias) in arms.items():
        print(f"{arm}: weights {dict(zip(columns, np.round(weights, 3)))}, bias {bias:.3f}")
    print("\nrate per set (answered for answerable sets, abstained for ood):")
    decisions: dict[str, dict[str, np.ndarray]] = {}
    for name, rows in sorted(held.items()):
        answerable = "ood" not in name
        line = []
        for arm, (weights, bias) in arms.items():
            ok = correct(rows, weights, bias, answerable)
            decisions.setdefault(arm, {})[name] = ok
            line.append(f"{arm} {ok.mean():.3f}")
        print(f"  {name:28s} n={len(rows):4d}  " + "  ".join(line))
    rng = np.random.default_rng(args.seed)
    for group, names in (("held-out half", [n for n in held if n.startswith("half:")]),
                         ("company documents (never fitted)", [n for n in held if n.startswith("held:")])):
        # every set weighs the same: the mean of the per-set rates, bootstrapped within each set
        diffs = []
        for _ in range(5000):
            per = []
            for n in names:
                a, b = decisions["signals + coverage"][n], decisions["signals"][n]
                idx = rng.integers(0, len(a), len(a))
                per.append(float(a[idx].mean() - b[idx].mean()))
            diffs.append(np.mean(per))
        point = np.mean([decisions["signals + coverage"][n].mean() - decisions["signals"][n].mean() for n in names])
        low, high = np.percentile(diffs, [2.5, 97.5])
        print(f"{group}: mean per-set correct-decision rate, coverage minus without {point:+.3f} [{low:+.3f}, {high:+.3f}]")


if __name__ == "__main__":
    main()
