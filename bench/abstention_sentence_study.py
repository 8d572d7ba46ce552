"""Does the best sentence's cosine make the generic pack's abstention rules
better on documents they were not fitted on? (study, not a test; the signal is
abstention.signals' ``sentence_max``)

Each of the generic pack's four fits (the Chinese one, ``@latin``, ``@cross``,
``@cross_latin``: abstention.fit_for picks one by the scripts of the question
and of its evidence) is refitted the way bench/abstention_coverage_study.py
fits (logistic regression, L2 1e-3, weights >= 0, out-of-scope sets sharing half
the weight, the threshold maximising the lowest rate on the fitting half) on a
seeded half (seed 12) of its own fitting evidence, twice: over the signals it
was fitted on before (``signals``), and with ``sentence_max`` added
(``signals + sentence``); every signal but rerank_max is offered
to both, and one fitted negative is dropped. Fitting evidence, each written by
bench/generic_abstention.py (STUDY=dump, dump-near, dump-english,
dump-near-en, dump-cross-en):

    e5onnx        generic_abstention_evidence.jsonl (the company's collection
                  left out: it is a trial set) + generic_abstention_near.jsonl
    e5onnx@latin  generic_abstention_english.jsonl + generic_abstention_near_en.jsonl
    e5onnx@cross  generic_abstention_cross.jsonl
    e5onnx@cross_latin  generic_abstention_cross_en.jsonl

Judged on evidence never fitted on (``--trials``: bench/generic_abstention.py
STUDY=dump-trials, every own-document set written in a fresh user's trial,
each set's questions and its out-of-scope ones; more such files may follow,
e.g. sets kept outside the repository). Each question is decided by the fit
that judges it, under three arms: the fits shipped, all four refitted on
``signals``, all four refitted with ``sentence_max``. Printed: per collection
the answer rate of its questions and the abstention rate of its out-of-scope
ones, how many refused questions had the answering passage first, and the
mean per-cell correct-decision rate (every collection's questions and its
out-of-scope questions are one cell each, each cell weighing the same) with a
paired bootstrap 95% interval (resampling within each cell). ``--write``
prints the refitted constants as recipe JSON.

    python bench/abstention_sentence_study.py --trials bench/results/generic_abstention_trials.jsonl
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

from abstention_coverage_study import fit, generic_fits  # noqa: E402
from abstention_fit import split  # noqa: E402

from google.protobuf import json_format  # noqa: E402

from graphmesh.common.v1 import types_pb2  # noqa: E402
from services.common import names  # noqa: E402
from services.gateway.answer import abstention  # noqa: E402

RESULTS = REPO / "bench" / "results"
DATA = REPO / "tests" / "quality" / "data"
#: fit name -> its fitting evidence files.
FITTING = {"e5onnx": ("generic_abstention_evidence.jsonl", "generic_abstention_near.jsonl"),
           "e5onnx@latin": ("generic_abstention_english.jsonl", "generic_abstention_near_en.jsonl"),
           "e5onnx@cross": ("generic_abstention_cross.jsonl",),
           "e5onnx@cross_latin": ("generic_abstention_cross_en.jsonl",)}
#: The company documents' collection in generic_abstention_evidence.jsonl: a trial set, judged, never fitted.
TRIAL_COLLECTION = "abstrial"
#: The columns of a row: abstention.SIGNALS, then the signal studied here.
COLUMNS = (*abstention.SIGNALS, "sentence_max")


def sentence_max(results) -> float:
    """The best sentence.maxsim score among ``results`` (the largest cosine between the question and one
    sentence of a result, services.gateway.search.sentence_maxsim); the best pg.vector cosine when none
    carries one (the stage off or degraded)."""
    scores = [s.score for c in results for s in c.channel_scores if s.channel == names.SENTENCE_MAXSIM]
    if scores:
        return max(scores)
    return max((s.score for c in results for s in c.channel_scores if s.channel == names.PG_VECTOR), default=0.0)


def row(record: dict) -> tuple[np.ndarray, list]:
    """(the record's signals and sentence_max in COLUMNS order, its results)."""
    results = [json_format.ParseDict(c, types_pb2.Candidate(), ignore_unknown_fields=True) for c in record["results"]]
    return np.array([*abstention.signals(record["keywords"], results).vector(), sentence_max(results)]), results


def judging_fit(record: dict, results: list) -> str:
    """The name of the generic pack's fit that judges ``record`` (abstention.fit_for)."""
    fits = generic_fits()
    fit = abstention.fit_for(abstention.DEFAULT_MODEL, fits, record["query"], abstention.evidence_text(results),
                             abstention.first_text(results))
    return next(n for n, f in fits.items() if f is fit)


def fitting_sets(fit_name: str, folder: Path = RESULTS) -> dict[str, list[tuple[str, np.ndarray]]]:
    """{set: [(id, row)]} of the questions ``fit_name`` judges in its fitting files (out-of-scope sets named
    "ood", answerable ones "<file>:<set>"; the trial collection left out)."""
    out: dict[str, list] = {}
    for name in FITTING[fit_name]:
        for line in (folder / name).open(encoding="utf-8"):
            record = json.loads(line)
            if "error" in record or record["collection"] == TRIAL_COLLECTION:
                continue
            values, results = row(record)
            if judging_fit(record, results) != fit_name:
                continue
            key = "ood" if record["set"] == "ood" else f"{Path(name).stem}:{record['set']}"
            out.setdefault(key, []).append((record["id"], values))
    return out


def refit(fit_name: str, seed: int, extra: tuple[str, ...] = (), folder: Path = RESULTS) -> tuple[np.ndarray, float]:
    """The fit of ``fit_name`` on the seeded fitting half, over the six signals the shipped fits were offered
    (a signal fitted negative is dropped, as bench/abstention_fit.py does) and the ``extra`` ones."""
    columns = [k for k, name in enumerate(COLUMNS) if name in abstention.SIGNALS or name in extra]
    halves = {name: split(items, seed)[0] for name, items in fitting_sets(fit_name, folder).items()}
    return fit(halves, columns)


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def golds() -> dict[tuple[str, str], str]:
    """(set folder name, question id) -> gold text, for every trial set in the repository."""
    out = {}
    for path in DATA.glob("*_docs/queries.jsonl"):
        for line in path.open(encoding="utf-8"):
            row = json.loads(line)
            out[path.parent.name, row["id"]] = row.get("gold_text") or ""
    return out


def judged(paths: list[Path], arms: dict[str, dict[str, tuple[np.ndarray, float]]], extra_golds: list[Path]):
    """{(collection, "answerable" | "ood"): {arm: [correct decisions]}}, and per cell the refusals with the
    answering passage first, per arm."""
    gold = golds()
    for folder in extra_golds:
        for line in (folder / "queries.jsonl").open(encoding="utf-8"):
            question = json.loads(line)
            gold[folder.name, question["id"]] = question.get("gold_text") or ""
    cells: dict[tuple[str, str], dict[str, list[bool]]] = {}
    margins: dict[str, list[tuple[float, bool]]] = {}
    first_refused: dict[tuple[str, str], dict[str, int]] = {}
    for path in paths:
        for line in path.open(encoding="utf-8"):
            record = json.loads(line)
            values, results = row(record)
            name = judging_fit(record, results)
            answerable = record["set"] != "ood"
            cell = (record["collection"], "answerable" if answerable else "ood")
            text = _squeeze(gold.get((record["set"], record["id"].split(":", 1)[1]), "")) if answerable else ""
            first = bool(text) and bool(results) and text in _squeeze(results[0].text)
            for arm, by_fit in arms.items():
                weights, bias = by_fit[name]
                margin = float(values @ weights + bias)
                margins.setdefault(arm, []).append((margin, answerable))
                answered = margin >= 0.0
                cells.setdefault(cell, {}).setdefault(arm, []).append(answered == answerable)
                if answerable and first and not answered:
                    first_refused.setdefault(cell, {}).setdefault(arm, 0)
                    first_refused[cell][arm] += 1
    return cells, first_refused, margins


def bootstrap(cells: dict, a: str, b: str, seed: int, rounds: int = 5000) -> tuple[float, float, float]:
    """Mean per-cell correct-decision rate of arm ``a`` minus arm ``b``, and its 95% interval."""
    rng = np.random.default_rng(seed)
    pairs = [(np.array(c[a], dtype=float), np.array(c[b], dtype=float)) for c in cells.values()]
    point = float(np.mean([x.mean() - y.mean() for x, y in pairs]))
    draws = []
    for _ in range(rounds):
        per = []
        for x, y in pairs:
            idx = rng.integers(0, len(x), len(x))
            per.append(x[idx].mean() - y[idx].mean())
        draws.append(np.mean(per))
    low, high = np.percentile(draws, [2.5, 97.5])
    return point, float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=Path, nargs="+", required=True, help="never-fitted evidence (STUDY=dump-trials)")
    parser.add_argument("--gold-folders", type=Path, nargs="*", default=[],
                        help="folders of sets outside the repository whose queries.jsonl give gold texts")
    parser.add_argument("--fitting-dir", type=Path, default=RESULTS, help="where the fitting evidence files are")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--write", action="store_true", help="print the refitted constants as recipe JSON")
    parser.add_argument("--write-arm", default="signals + sentence", help="the arm whose constants --write prints")
    args = parser.parse_args()
    shipped = {n: (np.array([*f.weights, 0.0]), f.bias) for n, f in generic_fits().items()}
    arms = {"shipped": shipped,
            "signals": {n: refit(n, args.seed, (), args.fitting_dir) for n in shipped},
            "signals + sentence": {n: refit(n, args.seed, ("sentence_max",), args.fitting_dir) for n in shipped}}
    for arm, by_fit in arms.items():
        for name, (weights, bias) in by_fit.items():
            print(f"{arm:20s} {name:20s} weights {np.round(weights, 3).tolist()} bias {bias:.3f}")
    cells, first_refused, margins = judged(args.trials, arms, args.gold_folders)
    print("\nper collection: answered (answerable) or abstained (ood); refused with the answering passage first")
    for cell in sorted(cells):
        rates = "  ".join(f"{arm} {np.mean(v):.3f}" for arm, v in cells[cell].items())
        refused = first_refused.get(cell, {})
        extra = ("  first-refused " + " / ".join(str(refused.get(a, 0)) for a in arms)) if cell[1] == "answerable" else ""
        print(f"  {cell[0]:18s} {cell[1]:10s} n={len(next(iter(cells[cell].values()))):3d}  {rates}{extra}")
    for kind in ("answerable", "ood"):
        for arm in arms:
            pooled = [x for c, v in cells.items() if c[1] == kind for x in v[arm]]
            print(f"pooled {kind:10s} {arm:20s} {np.mean(pooled):.3f} of {len(pooled)}")
    for arm, pairs in margins.items():
        pos = np.array([m for m, y in pairs if y])
        neg = np.array([m for m, y in pairs if not y])
        auc = float(np.mean(neg[:, None] < pos[None, :]) + 0.5 * np.mean(neg[:, None] == pos[None, :]))
        print(f"AUC of the margin over the fitted threshold, questions against out-of-scope ones, {arm}: {auc:.3f}")
    for a, b in (("signals + sentence", "shipped"), ("signals + sentence", "signals"), ("signals", "shipped")):
        point, low, high = bootstrap(cells, a, b, args.seed)
        print(f"mean per-cell correct-decision rate, {a} minus {b}: {point:+.3f} [{low:+.3f}, {high:+.3f}]")
    if args.write:
        for name, (weights, bias) in arms[args.write_arm].items():
            print(json.dumps({name: {"weights": [round(float(w), 3) for w in weights], "bias": round(bias, 3)}}))


if __name__ == "__main__":
    main()
