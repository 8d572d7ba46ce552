"""Answer quality (benchmark, not a test): answer and abstention rates,
correctness and completeness against the references (judge rules, no LLM),
the reference parts (character ROUGE-L, articles, numbers), citation
precision before and after verification, and latency, per question set,
against a running stack (``graphmesh up [--llm MODEL]``, law corpus
ingested).

    python bench/answer_quality.py --label extractive
    python bench/answer_quality.py --label qwen0.5b --sample 40 --sets scenario consult facts

Sets: the three law dev sets (../shared/data/law-zh), the out-of-domain file
and the short law questions (bench/data). ``--sample N`` takes a fixed-seed
(``--seed``, 12) sample of N questions per set (all with 0): LLM answers on
2 cores take seconds each. Questions run ``--concurrency`` at a time (1 for
a local LLM: it has one slot). Citation precision "before" is the share of
the answer's original [n] marks whose source the verifier accepted as
cited; "after" is the share of the marks left after verification that the
verifier accepts (1.0 by construction); the "bigram" figures judge the same
marks by the independent rule of the judge's faithfulness (half of the
sentence's character bigrams in the source). "verifier@t" gives the
precision before at support thresholds 0.4/0.5/0.6. Saves
bench/results/answer_quality-<label>-<time>.json;
``--combine FILE...`` merges saved runs (chunks) per label and set.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

import domains  # noqa: E402
from bench.abstention_fit import SETS  # noqa: E402
from services.common import citation_check  # noqa: E402
from services.cli import evaluate  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402


def sample(rows: list[dict], n: int, seed: int, offset: int = 0) -> list[dict]:
    """Rows ``offset`` .. ``offset + n`` of a fixed-seed shuffle, in file
    order (all rows when n is 0). A smaller sample is a prefix of a larger
    one with the same seed, so runs can be done in chunks."""
    if not n:
        return rows
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    keep = set(order[offset: offset + n])
    return [r for i, r in enumerate(rows) if i in keep]


def figures(rows: list[evaluate.QueryRow], supports: list[float]) -> dict:
    """The table row of one set."""
    ok = [r for r in rows if not r.error]
    summary = evaluate.summarise(ok) if ok else {}
    answers = summary.get("answers", {})
    judge = summary.get("judge", {})
    answered = [r for r in ok if r.answer_mode != "abstained"]

    def mean_judge(name: str) -> float | None:
        values = [r.judge.get(name) for r in answered if r.judge.get(name) is not None]
        return round(statistics.fmean(values), 4) if values else None

    latency = sorted(r.latency_ms / 1000 for r in ok)
    return {
        "n": len(rows), "errors": len(rows) - len(ok),
        "answer_rate": answers.get("answer_rate"), "abstain_rate": answers.get("abstain_rate"),
        "modes": answers.get("modes"),
        "correctness": mean_judge("correctness"), "completeness": mean_judge("completeness"),
        "faithfulness": mean_judge("faithfulness"),
        "reference": answers.get("reference"),
        "citation_marks": answers.get("citation_marks"),
        "citation_precision_before": answers.get("citation_precision_before"),
        "citation_precision_after": answers.get("citation_precision_after"),
        "bigram_precision_before": answers.get("bigram_precision_before"),
        "bigram_precision_after": answers.get("bigram_precision_after"),
        "verifier@t": {str(t): round(sum(s >= t for s in supports) / len(supports), 4) if supports else None
                       for t in (0.4, 0.5, 0.6)},
        "unsupported_per_answer": answers.get("unsupported_per_answer"),
        "latency_s": {"mean": round(statistics.fmean(latency), 2), "p50": round(latency[len(latency) // 2], 2),
                      "max": round(latency[-1], 2)} if latency else {},
        "judge_means_all_rows": {k: v["mean"] for k, v in judge.items() if k in ("correctness", "completeness")},
    }


def _rule_sentence(sentence: str, rules) -> bool:
    """Whether ``sentence`` states a legal rule by naming a law or article
    (the law pack's citation rules)."""
    return bool(rules.source_names.search(sentence) or rules.named_groups(sentence))


def citing(rows: list[evaluate.QueryRow]) -> dict:
    """How the answers cite (issue 29's targets): over the LLM's own streamed
    text (``--stream``), the share of sentences with a mark and of the
    sentences naming a law or article with one, and the answers naming a
    law or article no packed source holds; over the final answers, the same
    after verification, and the share of answered questions whose citations
    include a gold article; the time to first token (seconds)."""
    rules = domains.citation_rules(["law_zh"])
    raw = [r for r in rows if not r.error and r.raw_answer]
    final = [r for r in rows if not r.error and r.answer_mode != "abstained" and r.answer]

    def coverage(texts: list[str]) -> dict:
        sentences = [(s, marks) for text in texts for s, marks in citation_check.marked_sentences(text)]
        stating = [(s, marks) for s, marks in sentences if _rule_sentence(s, rules)]
        return {"sentences": len(sentences), "marked": round(sum(bool(m) for _, m in sentences) / len(sentences), 4) if sentences else None,
                "rule_sentences": len(stating),
                "rule_marked": round(sum(bool(m) for _, m in stating) / len(stating), 4) if stating else None}

    def unheld(r: evaluate.QueryRow, text: str) -> list[str]:
        sources = [f"{label}\n{text}" for label, text in zip(r.context_labels, r.contexts)]
        return citation_check.unheld_references(text, sources, rules) if sources else []

    first = sorted(r.first_token_ms / 1000 for r in raw if r.first_token_ms is not None)
    llm_final = [r for r in final if r.answer_mode == "llm"]
    return {
        "llm_raw": {"answers": len(raw), **coverage([r.raw_answer for r in raw]),
                    "answers_naming_unheld": sum(bool(unheld(r, r.raw_answer)) for r in raw)},
        "llm_final": {"answers": len(llm_final), **coverage([r.answer for r in llm_final])},
        "final_answers_naming_unheld": sum(bool(unheld(r, r.answer)) for r in final),
        "off_topic": {"answers": sum(any(c.get("off_topic") for c in r.checks) for r in llm_final),
                      "kept_sentences": sum(c["final"] > 0 for r in llm_final for c in r.checks),
                      "flagged": sum(bool(c.get("off_topic")) for r in llm_final for c in r.checks)},
        "gold_cited": round(sum(bool(set(r.gold) & set(r.cited_ids)) for r in final) / len(final), 4) if final else None,
        "gold_cited_of_all": round(sum(bool(set(r.gold) & set(r.cited_ids)) for r in final) / len(rows), 4) if rows else None,
        "first_token_s": {"p50": round(first[len(first) // 2], 2), "p95": round(first[min(len(first) - 1, int(0.95 * len(first)))], 2)}
        if first else {},
    }


async def run_set(rows: list[dict], args) -> list[evaluate.QueryRow]:
    """Answers ``rows`` and judges them."""
    return await evaluate.run_queries(args.gateway, rows, args.top_k, args.concurrency, args.timeout, answers=True,
                                      judge_address=args.judge, stream=args.stream)


def combine(paths: list[Path]) -> dict[str, dict[str, dict]]:
    """Merges saved runs (chunks of one label) per label and set from their
    per-question rows: n, answer rate, correctness, reference parts,
    citation precision before/after (verifier and bigram rule), latency;
    completeness as the answered-weighted mean of the chunks' means."""
    merged: dict[str, dict[str, dict]] = {}
    for path in paths:
        run = json.loads(path.read_text())
        for name, rows in run["rows"].items():
            slot = merged.setdefault(run["label"], {}).setdefault(name, {"rows": [], "completeness": []})
            slot["rows"].extend(r for r in rows if not r["error"])
            answered = sum(r["mode"] != "abstained" for r in rows if not r["error"])
            if run["sets"][name].get("completeness") is not None:
                slot["completeness"].append((run["sets"][name]["completeness"], answered))
    out: dict[str, dict[str, dict]] = {}
    for label, sets in merged.items():
        for name, slot in sets.items():
            rows = slot["rows"]
            answered = [r for r in rows if r["mode"] != "abstained"]
            cit = {k: sum(r["citations"].get(k, 0) for r in rows) for k in ("marks", "supported", "reattributed", "removed",
                                                                            "kept", "bigram_before", "bigram_after")}

            def mean(values: list) -> float | None:
                values = [v for v in values if v is not None]
                return round(statistics.fmean(values), 4) if values else None

            weight = sum(n for _, n in slot["completeness"])
            latency = sorted(r["latency_ms"] / 1000 for r in rows)
            out.setdefault(label, {})[name] = {
                "n": len(rows), "answer_rate": round(len(answered) / len(rows), 4) if rows else None,
                "modes": {m: sum(r["mode"] == m for r in rows) for m in sorted({r["mode"] for r in rows})},
                "correctness": mean([r["correctness"] for r in answered]),
                "completeness": round(sum(v * n for v, n in slot["completeness"]) / weight, 4) if weight else None,
                **{k: mean([r["reference"].get(k) for r in answered]) for k in ("rouge_l", "articles", "numbers")},
                "citations": cit,
                "precision_before": round(cit["supported"] / cit["marks"], 4) if cit["marks"] else None,
                "precision_after": 1.0 if cit["kept"] else None,
                "bigram_before": round(cit["bigram_before"] / cit["marks"], 4) if cit["marks"] else None,
                "bigram_after": round(cit["bigram_after"] / cit["kept"], 4) if cit["kept"] else None,
                "latency_s": {"mean": round(statistics.fmean(latency), 1), "p50": round(latency[len(latency) // 2], 1)}
                if latency else {},
            }
    return out


def main() -> None:
    if sys.argv[1:2] == ["--combine"]:
        print(json.dumps(combine([Path(p) for p in sys.argv[2:]]), ensure_ascii=False, indent=1))
        return
    use_local_mesh_token()  # the judge serves mesh callers only: use the local stack's token
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    addresses = MeshAddresses()
    parser.add_argument("--label", required=True, help="what answered: extractive, qwen0.5b, qwen1.5b")
    parser.add_argument("--sets", nargs="*", default=list(SETS))
    parser.add_argument("--sample", type=int, default=0)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--offset", type=int, default=0, help="skip this many of the shuffled order (chunked runs)")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--gateway", default=addresses.gateway_addr)
    parser.add_argument("--judge", default=addresses.judge_addr)
    parser.add_argument("--stream", action="store_true",
                        help="answer through AnswerStream: keep the LLM's own text and the time to first token")
    args = parser.parse_args()
    out = REPO / "bench" / "results" / f"answer_quality-{args.label}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"label": args.label, "settings": vars(args), "sets": {}, "rows": {}}
    for name in args.sets:
        rows = sample(evaluate.load_dataset(SETS[name]), args.sample, args.seed, args.offset)
        started = time.perf_counter()
        done = asyncio.run(run_set(rows, args))
        supports = [v for r in done for v in r.supports]
        record["sets"][name] = {**figures(done, supports), "citing": citing(done),
                                "wall_s": round(time.perf_counter() - started, 1)}
        record["rows"][name] = [{"id": r.id, "mode": r.answer_mode, "answerability": r.answerability, "citations": r.citations,
                                 "reference": r.reference, "latency_ms": round(r.latency_ms), "error": r.error,
                                 "correctness": r.judge.get("correctness"), "query": r.query, "answer": r.answer,
                                 "checks": r.checks, "judge_parts": r.judge_parts, "judge_ms": r.judge_ms,
                                 "contexts": r.contexts, "reference_answer": evaluate.reference_of(row),
                                 "context_labels": r.context_labels, "cited_ids": r.cited_ids, "gold": r.gold,
                                 "raw_answer": r.raw_answer, "first_token_ms": r.first_token_ms}
                                for r, row in zip(done, rows)]
        print(name, json.dumps(record["sets"][name], ensure_ascii=False), flush=True)
        out.write_text(json.dumps(record, ensure_ascii=False, indent=1))
    print(f"saved to {out}")


if __name__ == "__main__":
    main()
