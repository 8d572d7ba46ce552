"""Does the lexical coverage signal make the generic pack's Chinese abstention
rule better on documents it was not fitted on? (study, not a test; the
signal is abstention.signals' ``coverage`` since this study)

The rule (services/gateway/answer/abstention.py, fit "e5onnx" of
domains/generic/recipes.json) answers mostly by the best two pg.vector
cosines. A fresh user's trial found it answering questions whose words the
evidence does not hold: 员工生日有什么福利？ over an office's documents was
answered from a hotel-rate table (answerability 0.81). The signal,
``coverage``: the share of the question's content words (QueryInfo.keywords,
two characters or more, a word inside a longer one dropped) found in the top
three results' title, heading path and text.

Offline, on the evidence bench/generic_abstention.py dumped
(bench/results/generic_abstention_evidence.jsonl): the rule is refitted the
way bench/abstention_fit.py fits (logistic regression, L2 1e-3, weights >= 0,
out-of-scope sets sharing half the weight, the threshold maximising the
lowest rate on the fitting half) on a seeded half (seed 12) of the design
documents and the law files collections (and with ``--near``, of
bench/data/near_fit: near-domain out-of-scope questions), with and without
``coverage``; each, and the fit before coverage ("previous"), is scored on
the other half and on collections no fit sees: the company documents (its
37 questions, 14 workplace and 209 general out-of-scope questions) and,
with ``--held-out``, the handbook and office sets. Printed: each set's
answer or abstention rate, and the paired difference in the mean per-set
correct-decision rate with a bootstrap 95% interval.

``--fit`` studies another of the generic pack's fits the same way, on the
questions that fit judges (``abstention.fit_for``): ``e5onnx@latin`` (English
questions over English evidence) with ``--evidence
bench/results/generic_abstention_english.jsonl`` (bench/data/english_fit,
STUDY=dump-english) and, never fitted, ``--held-out
bench/results/generic_abstention_trials.jsonl`` (every trial set, STUDY=dump-trials);
"previous" is then the fit shipped.

    STUDY=dump-near ... pytest bench/generic_abstention.py   (bench/generic_abstention.py's docstring)
    python bench/abstention_coverage_study.py [--evidence FILE] \
        [--near bench/results/generic_abstention_near.jsonl] \
        [--held-out bench/results/generic_abstention_near_held_out.jsonl] [--fit e5onnx@latin]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "gen" / "python")]

from abstention_fit import fit_logistic, split  # noqa: E402

from google.protobuf import json_format  # noqa: E402

import domains  # noqa: E402
from graphmesh.common.v1 import types_pb2  # noqa: E402
from services.gateway.answer import abstention  # noqa: E402

EVIDENCE = REPO / "bench" / "results" / "generic_abstention_evidence.jsonl"
WORKPLACE = REPO / "tests" / "quality" / "data" / "company_docs" / "out_of_scope.jsonl"
HELD_OUT_COLLECTION = "abstrial"
#: The generic pack's e5onnx fit before coverage (weights over abstention.SIGNALS, bias with the threshold folded in).
PREVIOUS_FIT = (np.array([92.719, 85.148, 1.003, 0.0, 0.442, 0.0]), -154.434)


def generic_fits() -> dict[str, abstention.Fit]:
    """The generic domain pack's abstention fits, by name ("e5onnx", "e5onnx@latin", ...)."""
    return abstention.pack_fits([domains.get_pack("generic")])


def load(path: Path, held_out: set[str] = frozenset({HELD_OUT_COLLECTION}), prefix: str = "",
         fit_name: str = abstention.DEFAULT_MODEL) -> dict[str, list[tuple[str, np.ndarray]]]:
    """{set: [(id, signals + coverage)]} of the questions the generic pack's fit ``fit_name`` judges
    (``abstention.fit_for`` by the question's script and its evidence's); out-of-scope sets are "ood"
    (fitting collections) and, in the ``held_out`` collections, "held:<collection>:ood-workplace" /
    "ood-general" (the company's workplace questions apart) beside "held:<collection>:<set>". ``prefix``
    names a fitting file's sets."""
    workplace = {json.loads(line)["query"] for line in WORKPLACE.open(encoding="utf-8")}
    base = abstention.DEFAULT_MODEL
    fits = generic_fits()
    out: dict[str, list[tuple[str, np.ndarray]]] = {}
    for line in path.open(encoding="utf-8"):
        record = json.loads(line)
        if "error" in record:
            continue
        results = [json_format.ParseDict(c, types_pb2.Candidate(), ignore_unknown_fields=True) for c in record["results"]]
        if abstention.fit_for(base, fits, record["query"], abstention.evidence_text(results),
                                                                   abstention.first_text(results)) is not fits[fit_name]:
            continue  # judged by another fit
        assert (record["embedding_model"] or base) == base, record["embedding_model"]
        row = np.array(abstention.signals(record["keywords"], results).vector(), dtype=float)
        name = record["set"]
        if record["collection"] in held_out:
            kind = name
            if name == "ood" and record["collection"] == HELD_OUT_COLLECTION:  # the company's own questions apart
                kind = "ood-workplace" if record["query"] in workplace else "ood-general"
            name = f"held:{record['collection']}:{kind}"
        elif name != "ood":
            name = prefix + name
        out.setdefault(name, []).append((record["id"], row))
    return out


def fit(data: dict[str, list[np.ndarray]], columns: list[int]) -> tuple[np.ndarray, float]:
    """Weights over every column (0 outside ``columns``) and the bias with the threshold folded in."""
    names = list(data)
    x = np.vstack([np.array(data[s]) for s in names])
    y = np.concatenate([np.full(len(data[s]), 0.0 if _out_of_scope(s) else 1.0) for s in names])
    answerable = [s for s in names if not _out_of_scope(s)]
    negative = [s for s in names if _out_of_scope(s)]
    # out-of-scope sets share half of the weight, the answerable sets the other half, equally within each
    sample = np.concatenate([np.full(len(data[s]), 0.5 / len(negative if _out_of_scope(s) else answerable) / len(data[s]))
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
        low = min(float(np.mean(scores[s] < t)) if _out_of_scope(s) else float(np.mean(scores[s] >= t)) for s in names)
        if low > best:
            best, cut = low, float(t)
    lower = np.unique(np.concatenate(list(scores.values())))
    lower = lower[lower < cut]
    if len(lower):
        cut = (cut + lower[-1]) / 2
    return weights, bias - cut


def _out_of_scope(name: str) -> bool:
    return name.rsplit(":", 1)[-1].startswith("ood")


def correct(rows: list[np.ndarray], weights: np.ndarray, bias: float, answerable: bool) -> np.ndarray:
    answered = np.array(rows) @ weights + bias >= 0.0
    return answered if answerable else ~answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evidence", type=Path, default=EVIDENCE)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--near", type=Path, help="more fitting evidence (bench/generic_abstention.py dump-near's "
                                                  "generic_abstention_near.jsonl): its halves join the fit and the held-out half")
    parser.add_argument("--held-out", type=Path, nargs="*", default=[],
                        help="more evidence never fitted (generic_abstention_near_held_out.jsonl, "
                             "generic_abstention_trials.jsonl), scored whole")
    parser.add_argument("--fit", default=abstention.DEFAULT_MODEL, choices=sorted(generic_fits()),
                        help="the generic pack's fit to study: only the questions it judges are read (default the "
                             "Chinese e5onnx fit; e5onnx@latin with --evidence bench/results/generic_abstention_english.jsonl)")
    args = parser.parse_args()
    by_set = load(args.evidence, fit_name=args.fit)
    if args.near:
        for name, items in load(args.near, held_out=set(), prefix="near:", fit_name=args.fit).items():
            by_set.setdefault("near:ood" if name == "ood" else name, []).extend(items)
    for path in args.held_out:
        collections = {json.loads(line)["collection"] for line in path.open(encoding="utf-8")}
        for name, items in load(path, held_out=collections, fit_name=args.fit).items():
            by_set.setdefault(name, []).extend(items)
    fitting, held = {}, {}
    for name, items in by_set.items():
        if name.startswith("held:"):
            held[name] = [row for _, row in items]
            continue
        first, second = split(items, args.seed)
        fitting[name], held[f"half:{name}"] = first, second
    with_coverage = list(range(len(abstention.SIGNALS)))
    base_cols = [k for k in with_coverage if abstention.SIGNALS[k] != "coverage"]
    shipped = generic_fits()[args.fit]
    # "previous": the Chinese fit before coverage existed; for a script's fit, the one shipped now
    previous = PREVIOUS_FIT if args.fit == abstention.DEFAULT_MODEL else (np.array(shipped.weights), shipped.bias)
    arms = {"previous": previous, "signals": fit(fitting, base_cols), "signals + coverage": fit(fitting, with_coverage)}
    columns = list(abstention.SIGNALS)
    for arm, (weights, bias) in arms.items():
        print(f"{arm}: weights {dict(zip(columns, np.round(weights, 3)))}, bias {bias:.3f}")
    print("\nrate per set (answered for answerable sets, abstained for ood):")
    decisions: dict[str, dict[str, np.ndarray]] = {}
    for name, rows in sorted(held.items()):
        answerable = not _out_of_scope(name)
        line = []
        for arm, (weights, bias) in arms.items():
            ok = correct(rows, weights, bias, answerable)
            decisions.setdefault(arm, {})[name] = ok
            line.append(f"{arm} {ok.mean():.3f}")
        print(f"  {name:40s} n={len(rows):4d}  " + "  ".join(line))
    rng = np.random.default_rng(args.seed)
    for group, names in (("held-out half", [n for n in held if n.startswith("half:")]),
                         ("never fitted", [n for n in held if n.startswith("held:")])):
        for arm, other in (("signals + coverage", "signals"), ("signals + coverage", "previous"), ("signals", "previous")):
            # every set weighs the same: the mean of the per-set rates, bootstrapped within each set
            diffs = []
            for _ in range(5000):
                per = []
                for n in names:
                    a, b = decisions[arm][n], decisions[other][n]
                    idx = rng.integers(0, len(a), len(a))
                    per.append(float(a[idx].mean() - b[idx].mean()))
                diffs.append(np.mean(per))
            point = np.mean([decisions[arm][n].mean() - decisions[other][n].mean() for n in names])
            low, high = np.percentile(diffs, [2.5, 97.5])
            print(f"{group}: mean per-set correct-decision rate, {arm} minus {other} {point:+.3f} [{low:+.3f}, {high:+.3f}]")


if __name__ == "__main__":
    main()
