"""Do lexical signals beyond ``coverage`` tell near-topic out-of-scope questions from answerable ones on
documents no rule was fitted on? (study, not a test; tried 2026-12-07, nothing shipped)

Evidence: ``STUDY=dump-trials TRIALS=<every *_docs set> EXTRA=bench/data/near_fit,bench/data/near_fit_en
OUT=FILE pytest bench/generic_abstention.py -k dump_trials ...`` (bench/generic_abstention.py's docstring):
each own-document set's questions and out-of-scope questions searched in its own collection, top_k 10.

For the questions the generic pack's Chinese fit judges (``--fit e5onnx``; abstention.fit_name), the
rule is refitted leaving one collection out at a time (logistic regression, bench/abstention_fit.py's
``fit_logistic``, weights >= 0, the answerable and the out-of-scope questions each half the weight and each
collection an equal share of its half; threshold 0.5), with the six signals alone and with each candidate
signal added:

  cov10    share of the question's content words in the top 10 results (coverage reads the top 3)
  cov1     the same in the first result
  wcov3 / wcov10  coverage weighted by how rare each word is in jieba's dictionary (8 - zipf, at least 0.5)
  rare3 / rare10  the question's rarest word (jieba's dictionary) in the top 3 / 10
  allin10  every content word in the top 10

Printed: answered / refused rates pooled and per collection, the shipped fit's beside them, the paired
bootstrap interval of each variant against the six signals refitted the same way, and (``--auc``) each
signal's AUC between answerable and out-of-scope questions.

    python bench/abstention_lexical_study.py FILE [--fit e5onnx] [--auc]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "gen" / "python")]

from abstention_fit import fit_logistic  # noqa: E402
from google.protobuf import json_format  # noqa: E402

import domains  # noqa: E402
from graphmesh.common.v1 import types_pb2  # noqa: E402
from services.gateway.answer import abstention, evidence_signals  # noqa: E402

VARIANTS = (["cov10"], ["cov1"], ["wcov3"], ["wcov10"], ["rare10"], ["rare3"], ["allin10"], ["cov10", "rare10"],
            ["cov10", "cov1", "rare10", "allin10"])


def load(path: Path, fit_name: str) -> list[dict]:
    """One row per question the fit ``fit_name`` judges: collection, answerable, the six signals, the candidate
    signals, whether the first result holds every word, the shipped fit's decision."""
    import jieba

    jieba.initialize()
    freq, total = jieba.dt.FREQ, jieba.dt.total
    fits = abstention.pack_fits([domains.get_pack("generic")])

    def zipf(word: str) -> float:
        return math.log10(freq[word] / total * 1e9) if freq.get(word) else 0.0

    rows = []
    for line in path.open(encoding="utf-8"):
        record = json.loads(line)
        if "error" in record:
            continue
        results = [json_format.ParseDict(c, types_pb2.Candidate(), ignore_unknown_fields=True) for c in record["results"]]
        name = abstention.fit_name(abstention.DEFAULT_MODEL, fits, record["query"], abstention.evidence_text(results),
                                   abstention.first_text(results))
        if name != fit_name:
            continue
        sig = evidence_signals.signals(record["keywords"], results)
        words = [evidence_signals._NON_WORD.sub("", k.lower()) for k in record["keywords"]]  # noqa: SLF001
        words = [w for w in words if len(w) >= 2 and not any(w != o and w in o for o in words)]
        top = [evidence_signals._text(c) for c in results]  # noqa: SLF001
        t1, t3, t10 = (" ".join(top[:n]) for n in (1, 3, 10))
        weight = [max(0.5, 8 - zipf(w)) for w in words]
        rare = min(words, key=zipf) if words else ""

        def share(text: str, weighted: bool = False) -> float:
            if not words:
                return 0.0
            if weighted:
                return sum(x for w, x in zip(words, weight) if w in text) / sum(weight)
            return sum(w in text for w in words) / len(words)

        fit = fits[fit_name]
        rows.append({"collection": record["collection"], "answerable": record["set"] != "ood",
                     "base": list(sig.vector()), "holds": sig.first_holds_all,
                     "shipped": abstention.answerability(sig, fit.weights, fit.bias) >= 0.5 or sig.first_holds_all,
                     "extra": {"cov10": share(t10), "cov1": share(t1), "wcov3": share(t3, True), "wcov10": share(t10, True),
                               "rare10": float(bool(rare) and rare in t10), "rare3": float(bool(rare) and rare in t3),
                               "allin10": float(bool(words) and all(w in t10 for w in words))}})
    return rows


def matrix(rows: list[dict], extra: list[str]) -> np.ndarray:
    return np.array([r["base"] + [r["extra"][e] for e in extra] for r in rows])


def fit(rows: list[dict], extra: list[str]) -> tuple[np.ndarray, float]:
    """Weights (>= 0: a negative one is dropped and the rest refitted) and bias; classes and collections balanced."""
    x, y = matrix(rows, extra), np.array([r["answerable"] for r in rows], float)
    counts = Counter((r["collection"], r["answerable"]) for r in rows)
    per_class = {c: len({k for k, a in counts if a == c}) for c in (True, False)}
    sample = np.array([0.5 / per_class[r["answerable"]] / counts[(r["collection"], r["answerable"])] for r in rows]) * len(rows)
    active = list(range(x.shape[1]))
    while True:
        weights, bias = fit_logistic(x, y, active, sample)
        negative = [k for k in active if weights[k] < 0]
        if not negative:
            return weights, bias
        active.remove(min(negative, key=lambda k: weights[k]))


def leave_one_out(rows: list[dict], extra: list[str]) -> np.ndarray:
    """Each question's decision under the rule fitted on every other collection."""
    decided = np.zeros(len(rows), bool)
    for collection in sorted({r["collection"] for r in rows}):
        weights, bias = fit([r for r in rows if r["collection"] != collection], extra)
        for i, r in enumerate(rows):
            if r["collection"] == collection:
                decided[i] = float(matrix([r], extra)[0] @ weights + bias) >= 0 or r["holds"]
    return decided


def report(label: str, rows: list[dict], answered: np.ndarray) -> None:
    y = np.array([r["answerable"] for r in rows])
    print(f"{label:30s} answered {answered[y].sum()}/{y.sum()} ({answered[y].mean():.3f})  "
          f"refused {(~answered[~y]).sum()}/{(~y).sum()} ({(~answered[~y]).mean():.3f})")


def paired(rows: list[dict], a: np.ndarray, b: np.ndarray, draws: int = 2000) -> tuple[float, float, float]:
    """Mean balanced difference in correct decisions, a minus b, with a bootstrap 95% interval over questions."""
    y = np.array([r["answerable"] for r in rows])
    weight = np.where(y, 0.5 / y.sum(), 0.5 / (~y).sum())
    diff = ((a == y).astype(float) - (b == y).astype(float)) * weight
    rng = np.random.default_rng(0)
    draws_ = [diff[s].sum() / weight[s].sum() for s in (rng.integers(0, len(y), len(y)) for _ in range(draws))]
    return float(diff.sum()), float(np.percentile(draws_, 2.5)), float(np.percentile(draws_, 97.5))


def auc(rows: list[dict], value) -> float:
    pos = [value(r) for r in rows if r["answerable"]]
    neg = [value(r) for r in rows if not r["answerable"]]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / len(pos) / len(neg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("evidence", type=Path)
    parser.add_argument("--fit", default=abstention.DEFAULT_MODEL)
    parser.add_argument("--auc", action="store_true")
    args = parser.parse_args()
    rows = load(args.evidence, args.fit)
    print(f"{args.fit}: {len(rows)} questions, {sum(r['answerable'] for r in rows)} answerable, "
          f"{len({r['collection'] for r in rows})} collections")
    if args.auc:
        for i, name in enumerate(abstention.SIGNALS):
            print(f"AUC {name:14s} {auc(rows, lambda r, i=i: r['base'][i]):.3f}")
        for name in rows[0]["extra"]:
            print(f"AUC {name:14s} {auc(rows, lambda r, n=name: r['extra'][n]):.3f}")
        return
    shipped = np.array([r["shipped"] for r in rows])
    report("shipped fit", rows, shipped)
    base = leave_one_out(rows, [])
    report("six signals, refitted", rows, base)
    for extra in VARIANTS:
        variant = leave_one_out(rows, extra)
        delta, low, high = paired(rows, variant, base)
        report("+ " + ", ".join(extra), rows, variant)
        print(f"{'':30s} against the six refitted: {delta:+.3f} [{low:+.3f}, {high:+.3f}]")


if __name__ == "__main__":
    main()
