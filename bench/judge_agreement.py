"""Rule and LLM judge side by side (benchmark, not a test): for each metric
both parts scored, how far the LLM judge's three-round median agrees with
the rule score on the same answers, and what each costs.

Reads saved answer-quality runs made against a judge that has an LLM
(``GRAPHMESH_JUDGE_LLM__BASE_URL`` pointing at ``graphmesh up --llm``'s
server), e.g.

    python bench/answer_quality.py --label qwen1.5b-after --sets scenario --sample 40 --judge 127.0.0.1:50067
    python bench/judge_agreement.py bench/results/answer_quality-qwen1.5b-after-*.json

Per metric over the answered questions: n, mean rule and LLM score,
Spearman and Pearson correlation, mean absolute difference, agreement of
the two at 0.5 (both pass or both fail), and the LLM rounds' spread (mean
max - min of the three rounds). Cost: the Judge call's wall time with the
LLM (p50/p95 seconds, from the saved rows) against the rule-only judgement
of the same inputs, timed here in-process (services.judge.scoring.judge
with no LLM rounds).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

import domains  # noqa: E402
from services.judge import scoring  # noqa: E402

#: The metrics issue 29 asks for first; every other metric with both parts follows.
FIRST = ("faithfulness", "hallucination", "relevancy")


def ranks(values: list[float]) -> np.ndarray:
    """Average ranks (ties share their mean rank)."""
    array = np.asarray(values, dtype=float)
    order = array.argsort(kind="mergesort")
    out = np.empty(len(array))
    sorted_values = array[order]
    start = 0
    while start < len(array):
        end = start
        while end + 1 < len(array) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        out[order[start:end + 1]] = (start + end) / 2
        start = end + 1
    return out


def correlation(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson correlation; None when either side is constant."""
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return None
    return round(float(np.corrcoef(a, b)[0, 1]), 3)


def agreement(pairs: list[tuple[float, float]], rounds: list[list[float]]) -> dict:
    """The agreement figures of one metric's (rule, llm) pairs."""
    rule = np.array([r for r, _ in pairs])
    llm = np.array([m for _, m in pairs])
    return {
        "n": len(pairs), "rule_mean": round(float(rule.mean()), 3), "llm_mean": round(float(llm.mean()), 3),
        "spearman": correlation(ranks(list(rule)), ranks(list(llm))), "pearson": correlation(rule, llm),
        "mean_abs_diff": round(float(np.abs(rule - llm).mean()), 3),
        "agree_at_0.5": round(float(((rule >= 0.5) == (llm >= 0.5)).mean()), 3),
        "round_spread": round(statistics.fmean(max(r) - min(r) for r in rounds if r), 3) if rounds else None,
    }


def rule_seconds(row: dict) -> float:
    """Wall seconds of the rule-only judgement of ``row`` in this process."""
    inputs = scoring.JudgeInputs(question=row["query"], answer=row["answer"], contexts=row["contexts"],
                                 reference_answer=row.get("reference_answer") or "",
                                 citation_rules=domains.citation_rules(["law_zh"]))
    started = time.perf_counter()
    scoring.judge(inputs)
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(paths: list[Path]) -> dict:
    """Agreement per metric and judge cost per set over the saved runs."""
    out: dict[str, dict] = {}
    for path in paths:
        run = json.loads(path.read_text())
        for name, rows in run["rows"].items():
            answered = [r for r in rows if not r["error"] and r["mode"] != "abstained" and r.get("judge_parts")]
            if not answered:
                continue
            metrics = sorted({m for r in answered for m in r["judge_parts"]}, key=lambda m: (m not in FIRST, m))
            per_metric = {}
            for metric in metrics:
                parts = [r["judge_parts"][metric] for r in answered if metric in r["judge_parts"]]
                pairs = [(p["rule"], p["llm"]) for p in parts if p["rule"] is not None and p["llm"] is not None]
                llm_only = [p["llm"] for p in parts if p["rule"] is None and p["llm"] is not None]
                if pairs:
                    per_metric[metric] = agreement(pairs, [p["rounds"] for p in parts])
                elif llm_only:
                    per_metric[metric] = {"n": len(llm_only), "llm_mean": round(statistics.fmean(llm_only), 3),
                                          "rule": "none (LLM only)"}
            llm_s = [r["judge_ms"] / 1000 for r in answered if r.get("judge_ms")]
            rule_s = [rule_seconds(r) for r in answered if r.get("contexts")]
            out[f"{run['label']}/{name}"] = {
                "answers_judged": len(answered), "metrics": per_metric,
                "seconds": {"llm_judge_p50": round(percentile(llm_s, 0.5), 2) if llm_s else None,
                            "llm_judge_p95": round(percentile(llm_s, 0.95), 2) if llm_s else None,
                            "rule_only_p50": round(percentile(rule_s, 0.5), 4) if rule_s else None,
                            "rule_only_p95": round(percentile(rule_s, 0.95), 4) if rule_s else None},
            }
    return out


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(json.dumps(report([Path(p) for p in sys.argv[1:]]), ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
