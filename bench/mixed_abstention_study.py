"""Abstention in collections that hold documents of two writing systems (not a test): can a rule
fitted on mixed collections refuse more out-of-scope questions there without refusing more
answerable ones?

Evidence comes from bench/generic_abstention.py: ``STUDY=dump-mixed`` (two mixed collections made
of the fitting corpora only) and ``STUDY=dump-trials`` (the trial sets, with EXTRA for sets kept
outside the repository). Only records whose results carry a ``pg.centred`` score (the collection
holds both systems) are read. Each question falls in a group by its script and its gold line's:
"zh-en" is a Chinese question answered by an English line; "ood-zh" a Chinese out-of-scope one.

    PYTHONPATH=.:gen/python python bench/mixed_abstention_study.py MIXED.jsonl TRIALS.jsonl [EXTRA_FOLDER ...]

Prints, per group, the answer (or refusal) rate of
  - today's rule (services/gateway/answer/abstention.py with the generic pack's fits);
  - "either script": the weighted best cosine of the question's own script and of the other
    script, each against its own threshold, answer when either passes (thresholds and a bonus for
    the share of the question's words, translations included, held by the first three results:
    grid search per question script on the mixed fitting evidence, balanced accuracy);
  - logistic rules per question script over those cosines and lexical signals, each collection
    scored by a fit on all the others (leave one collection out, fitting and trial collections
    pooled, each collection weighing the same, out of scope half of it).
Findings: docs/benchmarks.md, "Abstention in collections of two writing systems".
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python"), str(REPO / "bench")]

import domains  # noqa: E402
from abstention_fit import fit_logistic  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from graphmesh.common.v1 import types_pb2  # noqa: E402
from services.common import names  # noqa: E402
from services.common.cross_lingual import share_held  # noqa: E402
from services.common.text import latin_script, without_cjk  # noqa: E402
from services.gateway.answer import abstention  # noqa: E402

FITS = abstention.pack_fits([domains.PACKS["generic"]])
#: Feature names of the logistic rules, in column order.
FEATURES = ("own", "other", "best", "held", "coverage", "longest_found")


def gold_texts(extra: list[str]) -> dict[str, str]:
    """{record id: gold line} of every trial set and of the ``extra`` folders."""
    folders = sorted((REPO / "tests" / "quality" / "data").glob("*_docs")) + [Path(f) for f in extra]
    gold = {}
    for folder in folders:
        collection = "trial_" + folder.name.removesuffix("_docs")
        for line in (folder / "queries.jsonl").open(encoding="utf-8"):
            row = json.loads(line)
            gold[f"{collection}:{row['id']}"] = row.get("gold_text", "")
    return gold


def features(query: str, results: list[types_pb2.Candidate], translation: dict) -> tuple[float, ...]:
    """FEATURES of one search: own / other = 0.6 x best + 0.4 x second-best pg.vector cosine among
    the results in the question's script / the other one (0 without any), best = the larger,
    held = the largest share of the question's words (translations included) a top-3 result holds."""
    script = "latin" if latin_script(query) else "cjk"
    own, other = [], []
    for cand in results:
        cosine = [s.score for s in cand.channel_scores if s.channel == names.PG_VECTOR]
        if cosine:
            (own if (cand.script or ("latin" if latin_script(cand.text) else "cjk")) == script else other).append(cosine[0])
    mix = (lambda xs: 0.0 if not xs else 0.6 * xs[0] + 0.4 * xs[min(1, len(xs) - 1)])
    own_s, other_s = mix(sorted(own, reverse=True)), mix(sorted(other, reverse=True))
    words = [(w["word"], w.get("terms", []), w.get("synonyms", [])) for w in translation.get("words", [])]
    held = max((share_held(" ".join([c.title, *c.heading_path, c.text]), words) for c in results[:3]), default=0.0)
    return own_s, other_s, max(own_s, other_s), held


def load(path: Path, gold: dict[str, str] | None) -> list[dict]:
    """The mixed-collection records of an evidence file, with group, signals and features."""
    records = []
    for line in path.open(encoding="utf-8"):
        row = json.loads(line)
        results = [json_format.ParseDict(c, types_pb2.Candidate()) for c in row["results"]]
        if not any(s.channel == names.PG_CENTRED for c in results for s in c.channel_scores):
            continue
        lang = "en" if latin_script(row["query"]) else "zh"
        if row["set"] == "ood":
            group = "ood-" + lang
        elif gold is not None:
            group = lang + "-" + ("en" if without_cjk(gold.get(row["id"], "")) else "zh")
        else:
            group = row["set"]
        sig = abstention.signals(row["keywords"], results)
        own, other, best, held = features(row["query"], results, row.get("translation", {}))
        today = abstention.decide(sig, FITS, question=row["query"], evidence=abstention.evidence_text(results),
                                  first=abstention.first_text(results), vector_ran=True).answerable
        records.append({"collection": row["collection"], "group": group, "script": lang, "today": today,
                        "holds_all": sig.first_holds_all,
                        "x": np.array([own, other, best, held, sig.coverage, sig.longest_found])})
    return records


def summary(records: list[dict], answered: list[bool]) -> str:
    by: dict[str, list[bool]] = defaultdict(list)
    for record, a in zip(records, answered):
        by[record["group"]].append(a)
    return "; ".join(f"{g} refused {sum(not a for a in v)}/{len(v)}" if g.startswith("ood") else
                     f"{g} answered {sum(v)}/{len(v)}" for g, v in sorted(by.items()))


def either_script(records: list[dict], params: dict[str, tuple[float, float, float]]) -> list[bool]:
    return [max(r["x"][0] - params[r["script"]][0], r["x"][1] - params[r["script"]][1])
            + params[r["script"]][2] * r["x"][3] >= 0 or r["holds_all"] for r in records]


def balanced(records: list[dict], answered: list[bool]) -> float:
    by: dict[str, list[bool]] = defaultdict(list)
    for record, a in zip(records, answered):
        by[record["group"]].append(a)
    refuse = [1 - np.mean(v) for g, v in by.items() if g.startswith("ood")]
    answer = [np.mean(v) for g, v in by.items() if not g.startswith("ood")]
    return 0.5 * np.mean(refuse) + 0.5 * np.mean(answer)


def grid(records: list[dict], script: str) -> tuple[float, float, float]:
    mine = [r for r in records if r["script"] == script]
    candidates = [(round(a, 4), round(b, 4), c) for a in np.arange(0.80, 0.92, 0.0025)
                  for b in np.arange(0.74, 0.90, 0.0025) for c in (0.0, 0.01, 0.02, 0.03, 0.05)]
    return max(candidates, key=lambda p: balanced(mine, either_script(mine, {script: p})))


def leave_one_collection_out(records: list[dict], active: list[int]) -> list[bool]:
    answered = [False] * len(records)
    for held_out in sorted({r["collection"] for r in records}):
        for script in ("zh", "en"):
            train = [r for r in records if r["collection"] != held_out and r["script"] == script]
            counts: dict[tuple[str, bool], int] = defaultdict(int)
            for r in train:
                counts[r["collection"], r["group"].startswith("ood")] += 1
            n = len({r["collection"] for r in train})
            weight = np.array([0.5 / n / counts[r["collection"], r["group"].startswith("ood")] for r in train]) * len(train)
            x = np.array([r["x"] for r in train])
            y = np.array([0.0 if r["group"].startswith("ood") else 1.0 for r in train])
            w, b = fit_logistic(x, y, active, weight, 1e-2)
            for i, r in enumerate(records):
                if r["collection"] == held_out and r["script"] == script:
                    answered[i] = float(r["x"] @ w + b) >= 0 or r["holds_all"]
    return answered


def main() -> None:
    mixed = load(Path(sys.argv[1]), None)
    trials = load(Path(sys.argv[2]), gold_texts(sys.argv[3:]))
    print(f"mixed fitting records {len(mixed)}, trial records {len(trials)} "
          f"({', '.join(sorted({r['collection'] for r in trials}))})")
    print("today, fitting corpora:", summary(mixed, [r["today"] for r in mixed]))
    print("today, trials:         ", summary(trials, [r["today"] for r in trials]))
    params = {s: grid(mixed, s) for s in ("zh", "en")}
    print("either script", params)
    print("  fitting corpora:", summary(mixed, either_script(mixed, params)))
    print("  trials:         ", summary(trials, either_script(trials, params)))
    pooled = mixed + trials
    for active in ([0, 1], [0, 1, 3], [0, 1, 3, 4], [2, 3, 4], [0, 1, 2, 3, 4, 5]):
        answered = leave_one_collection_out(pooled, active)
        print(f"logistic over {[FEATURES[i] for i in active]}, trials (left out one at a time):",
              summary(trials, answered[len(mixed):]))


if __name__ == "__main__":
    main()
