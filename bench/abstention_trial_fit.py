"""Would the generic pack's abstention rules decide better fitted also on the
trial sets' questions? (study, not a test)

The shipped rules were fitted on evidence written for fitting
(bench/abstention_sentence_study.py FITTING); judged on the own-document sets
written in fresh users' trials (``STUDY=dump-trials``), they refuse one
answerable question in five. This study adds the trial sets' questions and
out-of-scope questions to each rule's fitting evidence (every trial question
goes to the rule that judges it, abstention.fit_for; a rule's trial questions
are two more fitting sets, answerable and out of scope, each weighing as one
set) and refits with the shipped procedure, over the shipped signals
(``signals``) and with ``sentence_max`` (``signals + sentence``):

- leave one set out: each trial collection is judged by rules fitted on the
  other nine (and the fitting evidence's seeded half);
- ``--blind FILE ...``: rules fitted on every trial collection judge evidence
  of sets kept outside the repository (``STUDY=dump-trials EXTRA=...``).

Printed as bench/abstention_sentence_study.py prints: per collection the answer
rate of its questions and the abstention rate of its out-of-scope ones, pooled
rates, and the mean per-cell correct-decision rate against the shipped rules
with a paired bootstrap 95% interval. ``--write`` prints the rules fitted on
every trial collection as recipe JSON.

    python bench/abstention_trial_fit.py --trials bench/results/generic_abstention_trials.jsonl \\
        [--blind /tmp/blind.jsonl --gold-folders /tmp/heldout/*_docs]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "gen" / "python")]

from abstention_coverage_study import fit, generic_fits  # noqa: E402
from abstention_fit import split  # noqa: E402
from abstention_sentence_study import COLUMNS, RESULTS, bootstrap, fitting_sets, judged, row, judging_fit  # noqa: E402

from services.gateway.answer import abstention  # noqa: E402

ARMS = {"signals": (), "signals + sentence": ("sentence_max",)}


def trial_rows(paths: list[Path]) -> list[tuple[str, str, bool, np.ndarray]]:
    """(collection, judging fit, answerable, row) of every record of ``paths``."""
    out = []
    for path in paths:
        for line in path.open(encoding="utf-8"):
            record = json.loads(line)
            values, results = row(record)
            out.append((record["collection"], judging_fit(record, results), record["set"] != "ood", values))
    return out


def refit_all(base: dict[str, dict[str, list[np.ndarray]]], trials: list[tuple[str, str, bool, np.ndarray]],
              leave_out: str = "") -> dict[str, dict[str, tuple[np.ndarray, float]]]:
    """{arm: {fit name: (weights, bias)}} fitted on ``base`` (each fit's fitting half) plus the trial rows of
    every collection but ``leave_out``."""
    arms = {}
    for arm, extra in ARMS.items():
        columns = [k for k, name in enumerate(COLUMNS) if name in abstention.SIGNALS or name in extra]
        by_fit = {}
        for name, sets in base.items():
            data = dict(sets)
            for answerable in (True, False):
                rows = [r for c, f, a, r in trials if f == name and a == answerable and c != leave_out]
                if rows:
                    data[f"trials:{'questions' if answerable else 'ood'}"] = rows
            by_fit[name] = fit(data, columns)
        arms[arm] = by_fit
    return arms


def report(cells: dict, arms: list[str], seed: int, title: str) -> None:
    print(f"\n{title}")
    for cell in sorted(cells):
        rates = "  ".join(f"{arm} {np.mean(cells[cell][arm]):.3f}" for arm in arms)
        print(f"  {cell[0]:18s} {cell[1]:10s} n={len(cells[cell][arms[0]]):3d}  {rates}")
    for kind in ("answerable", "ood"):
        line = "  ".join(f"{arm} {np.mean([x for c, v in cells.items() if c[1] == kind for x in v[arm]]):.3f}" for arm in arms)
        print(f"  pooled {kind:10s} {line}")
    for arm in arms[1:]:
        point, low, high = bootstrap(cells, arm, "shipped", seed)
        print(f"  mean per-cell correct-decision rate, {arm} minus shipped: {point:+.3f} [{low:+.3f}, {high:+.3f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=Path, nargs="+", required=True)
    parser.add_argument("--blind", type=Path, nargs="*", default=[])
    parser.add_argument("--gold-folders", type=Path, nargs="*", default=[])
    parser.add_argument("--fitting-dir", type=Path, default=RESULTS)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    shipped = {n: (np.array([*f.weights, 0.0]), f.bias) for n, f in generic_fits().items()}
    base = {name: {s: split(items, args.seed)[0] for s, items in fitting_sets(name, args.fitting_dir).items()}
            for name in shipped}
    trials = trial_rows(args.trials)
    names = ["shipped", *ARMS]
    cells: dict = {}
    for collection in sorted({c for c, *_ in trials}):
        arms = {"shipped": shipped, **refit_all(base, trials, leave_out=collection)}
        one, _, _ = judged_collection(args.trials, arms, collection)
        cells.update(one)
    report(cells, names, args.seed, "leave one trial set out")
    everything = {"shipped": shipped, **refit_all(base, trials)}
    for arm in ARMS:
        for name, (weights, bias) in everything[arm].items():
            print(f"{arm:20s} {name:20s} weights {np.round(weights, 3).tolist()} bias {bias:.3f}")
    if args.blind:
        blind, _, _ = judged(args.blind, everything, args.gold_folders)
        report(blind, names, args.seed, "fitted on every trial set, judged on the blind sets")
    if args.write:
        for name, (weights, bias) in everything["signals"].items():
            print(json.dumps({name: {"weights": [round(float(w), 3) for w in weights[:len(abstention.SIGNALS)]],
                                     "bias": round(bias, 3)}}))


def judged_collection(paths: list[Path], arms: dict, collection: str):
    """``judged`` over the records of one ``collection`` only."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as out:
        for path in paths:
            for line in path.open(encoding="utf-8"):
                if json.loads(line)["collection"] == collection:
                    out.write(line)
    try:
        return judged([Path(out.name)], arms, [])
    finally:
        Path(out.name).unlink()


if __name__ == "__main__":
    main()
