"""Rule and LLM judge side by side (benchmark, not a test): for each metric
both parts scored, how far the LLM judge's three-round median agrees with
the rule score on the same answers, and what each costs.

Judges the answers of a saved answer-quality run again with a judge that
has an LLM (a judge service started with ``GRAPHMESH_JUDGE_LLM__BASE_URL``
pointing at ``graphmesh up --llm``'s server), one answer at a time, and
reports; or reports on runs already judged that way:

    GRAPHMESH_JUDGE_PORT=50067 GRAPHMESH_JUDGE_LLM__BASE_URL=http://127.0.0.1:50060/v1 python -m services.judge &
    python bench/judge_agreement.py judge bench/results/answer_quality-qwen1.5b-after-<time>.json --judge 127.0.0.1:50067
    python bench/judge_agreement.py report bench/results/judged-*.json

``--perturb N`` also judges, for the first N answered rows of each set, two
answers known to be worse: another question's answer from the same run
("off_topic") and the answer with its numbers and article numbers changed
and 不得/应当 turned into 可以/无需 ("falsified"). The report then says, per
metric and for the rule and the LLM part alike, how often the real answer
scored above each worse one (a judge that cannot tell them apart scores
ties). ``--out`` names the judged file (default bench/results/judged-<run>).

Per metric over the answered questions: n, mean rule and LLM score,
Spearman and Pearson correlation, mean absolute difference, agreement of
the two at 0.5 (both pass or both fail), and the LLM rounds' spread (mean
max - min of the three rounds). Cost: the Judge call's wall time with the
LLM (p50/p95 seconds) against the rule-only judgement of the same inputs,
timed here in-process (services.judge.scoring.judge with no LLM rounds) and
as the answer run's call to the stack's rule-only judge.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

import domains  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.judge import scoring  # noqa: E402

#: The metrics issue 29 asks for first; every other metric with both parts follows.
FIRST = ("faithfulness", "hallucination", "relevancy")
#: Worse answers judged beside the real one with --perturb.
VARIANTS = ("off_topic", "falsified")


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
                                 context_labels=row.get("context_labels") or [], gold_ids=row.get("gold") or [],
                                 reference_answer=row.get("reference_answer") or "",
                                 citation_rules=domains.citation_rules(["law_zh"]))
    started = time.perf_counter()
    scoring.judge(inputs)
    return time.perf_counter() - started


_CHINESE_DIGITS = "零一二三四五六七八九"


def falsified(answer: str) -> str:
    """``answer`` with invented facts: every Arabic number n made 3n + 7,
    each digit of a Chinese article number shifted by three, and 不得 /
    应当 turned into 可以 / 无需."""
    out = re.sub(r"\d+", lambda m: str(int(m.group()) * 3 + 7), answer)
    out = re.sub(r"第([零一二三四五六七八九十百千]+)条", lambda m: "第" + "".join(
        _CHINESE_DIGITS[(_CHINESE_DIGITS.index(c) + 3) % 10] if c in _CHINESE_DIGITS else c for c in m.group(1)) + "条", out)
    return out.replace("不得", "可以").replace("应当", "无需")


def sensitivity(rows: list[dict]) -> dict:
    """Per variant and metric, for the rule and the LLM part: how many
    real answers scored above / equal to / below their worse variant, and
    the mean difference (real - variant)."""
    out: dict[str, dict] = {}
    for variant in VARIANTS:
        per_metric: dict[str, dict] = {}
        pairs = [(r["judge_parts"], r["perturbed"][variant]) for r in rows if variant in (r.get("perturbed") or {})]
        for metric in sorted({m for real, _ in pairs for m in real}, key=lambda m: (m not in FIRST, m)):
            entry = {}
            for part in ("rule", "llm"):
                diffs = [real[metric][part] - worse[metric][part] for real, worse in pairs
                         if metric in worse and real[metric][part] is not None and worse[metric][part] is not None]
                if diffs:
                    entry[part] = {"n": len(diffs), "above": sum(d > 0 for d in diffs), "ties": sum(d == 0 for d in diffs),
                                   "below": sum(d < 0 for d in diffs), "mean_diff": round(statistics.fmean(diffs), 3)}
            if entry:
                per_metric[metric] = entry
        if per_metric:
            out[variant] = per_metric
    return out


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
            rule_service_s = [r["judge_ms_rule_service"] / 1000 for r in answered if r.get("judge_ms_rule_service")]
            out[f"{run['label']}/{name}"] = {
                "answers_judged": len(answered), "metrics": per_metric, "sensitivity": sensitivity(answered),
                "seconds": {"llm_judge_p50": round(percentile(llm_s, 0.5), 2) if llm_s else None,
                            "llm_judge_p95": round(percentile(llm_s, 0.95), 2) if llm_s else None,
                            "rule_only_p50": round(percentile(rule_s, 0.5), 4) if rule_s else None,
                            "rule_only_p95": round(percentile(rule_s, 0.95), 4) if rule_s else None,
                            "rule_only_service_call_p50": round(percentile(rule_service_s, 0.5), 3) if rule_service_s else None},
            }
    return out


async def judge_run(path: Path, address: str, timeout: float, out: Path | None = None, perturb: int = 0) -> Path:
    """Judges every answered row of the run at ``path`` through the judge at
    ``address``, one at a time, keeping each metric's rule and LLM parts
    and the call's seconds; saves ``out`` (default bench/results/judged-<run
    name>) after each row and returns its path. Where that file exists (a
    judging that stopped), rows it holds judged with the LLM are kept and
    the rest judged; a call that fails UNAVAILABLE is made once more. The
    first ``perturb`` answered rows of each set also get their worse
    variants judged (``VARIANTS``)."""
    from graphmesh.judge.v1 import judge_pb2, judge_pb2_grpc
    from services.common.clients import channel

    import grpc

    if out is None:
        out = path if path.name.startswith("judged-") else path.with_name("judged-" + path.name)
    run = json.loads((out if out.exists() else path).read_text())  # resumes a judging that stopped
    ch = channel(address)
    stub = judge_pb2_grpc.JudgeServiceStub(ch)

    async def judge(row: dict, answer: str) -> tuple[dict, float]:
        request = judge_pb2.JudgeRequest(
            question=row["query"], answer=answer, contexts=row["contexts"],
            context_labels=row.get("context_labels") or [], gold_ids=row.get("gold") or [], k=10,
            reference_answer=row.get("reference_answer") or "", domain_packs=["law_zh"])
        for attempt in (1, 2):
            started = time.perf_counter()
            try:
                judged = await stub.Judge(request, timeout=timeout)
                break
            except grpc.aio.AioRpcError as err:  # a connection closed under the call: once more
                if attempt == 2 or err.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
        parts = {m.name: {"rule": round(m.rule_value, 4) if m.HasField("rule_value") else None,
                          "llm": round(m.llm_value, 4) if m.HasField("llm_value") else None,
                          "rounds": [round(v, 4) for v in m.llm_rounds]}
                 for m in judged.metrics if m.llm_rounds}
        return parts, round((time.perf_counter() - started) * 1000, 1)

    try:
        for name, rows in run["rows"].items():
            answered = [r for r in rows if not r["error"] and r["mode"] != "abstained" and r.get("contexts")]
            choose = random.Random(f"{name}-off-topic")
            for index, row in enumerate(answered):
                if not any(part.get("llm") is not None for part in (row.get("judge_parts") or {}).values()):
                    row.setdefault("judge_ms_rule_service", row.get("judge_ms"))
                    row["judge_parts"], row["judge_ms"] = await judge(row, row["answer"])
                    print(name, row["id"], f"{row['judge_ms'] / 1000:.1f} s",
                          {m: p["llm"] for m, p in row["judge_parts"].items() if m in FIRST}, flush=True)
                others = [r["answer"] for r in answered if r is not row and r["answer"] != row["answer"]]
                off_topic = choose.choice(others) if others else ""
                if index < perturb:
                    worse = {"off_topic": off_topic, "falsified": falsified(row["answer"])}
                    row.setdefault("perturbed", {})
                    for variant, answer in worse.items():
                        if variant not in row["perturbed"] and answer and answer != row["answer"]:
                            row["perturbed"][variant], _ = await judge(row, answer)
                out.write_text(json.dumps(run, ensure_ascii=False, indent=1))
    finally:
        await ch.close()
    return out


def main() -> None:
    use_local_mesh_token()  # the judge serves mesh callers only: use the local stack's token
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    judge = commands.add_parser("judge", help="judge a saved run's answers again with an LLM judge")
    judge.add_argument("run", type=Path)
    judge.add_argument("--judge", required=True, help="address of a judge service that has an LLM")
    judge.add_argument("--timeout", type=float, default=900.0)
    judge.add_argument("--out", type=Path, help="judged file to write (default: judged-<run> beside the run)")
    judge.add_argument("--perturb", type=int, default=0, help="rows per set also judged with worse answers")
    show = commands.add_parser("report", help="agreement and cost over judged runs")
    show.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args()
    if args.command == "judge":
        out = asyncio.run(judge_run(args.run, args.judge, args.timeout, args.out, args.perturb))
        print(f"saved to {out}")
        args.runs = [out]
    print(json.dumps(report(args.runs), ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
