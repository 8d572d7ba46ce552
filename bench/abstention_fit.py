"""Fits the abstention rule (services/gateway/answer/abstention.py) on dev data and
prints the separation and the chosen constants (benchmark, not a test).

    # 1. search every question once (any stack with the law corpus ingested)
    python bench/abstention_fit.py collect --gateway 127.0.0.1:50051 --out bench/results/abstention_evidence.jsonl
    # 2. fit on a seeded half, report on the other half and on the whole
    python bench/abstention_fit.py fit --evidence bench/results/abstention_evidence.jsonl

Data: the three law dev sets (answerable: every question has gold
articles in the corpus) and bench/data/out_of_domain_zh.jsonl (not
answerable). The split is per file, seeded (``--seed``, 12), half for
fitting and half held out. Model: logistic regression on the signals of
``abstention.signals``, balanced (OOD weighs half, each answerable set an equal share of the other half), L2
1e-3, weights constrained >= 0 (a feature fitted negative is dropped and
the rest refitted). Threshold: on the fitting half, the answerability that
maximises min(OOD abstention rate, each law set's answer rate).
``fit --check --model M`` evaluates the law_zh pack's fit for embedding
model M (``abstention.pack_fits``, from domains/law_zh/recipes.json) instead
of fitting. Cosines depend on the embedding
model, so the evidence must come from a stack embedding with the model
being fitted (``--model``, default the expander's default); the printed
``Fit`` has the threshold folded into its bias (answer at answerability
>= abstention.THRESHOLD, 0.5). ``collect --limit N`` searches the first N
questions of each answerable set (a bounded run); the OOD file is always
searched whole.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

import domains  # noqa: E402
from google.protobuf import json_format  # noqa: E402

from graphmesh.common.v1 import types_pb2  # noqa: E402
from services.gateway.answer import abstention  # noqa: E402

#: ../shared/data: the first ancestor of the checkout holding shared/data
#: (worktrees sit one level deeper than the main checkout).
SHARED = next((p / "shared" for p in REPO.parents if (p / "shared" / "data").is_dir()), REPO.parent / "shared")
LAW = SHARED / "data" / "law-zh"
SETS = {
    "scenario": LAW / "queries-scenario-dev.jsonl",
    "consult": LAW / "queries-consult-dev.jsonl",
    "facts": LAW / "queries-facts-dev.jsonl",
    "ood": REPO / "bench" / "data" / "out_of_domain_zh.jsonl",
    # Short law questions written for this check (no gold ids): answerable,
    # like the dev sets, but as short as the out-of-domain ones.
    "short": REPO / "bench" / "data" / "short_law_zh.jsonl",
}
OOD = "ood"


async def collect(gateway: str, out: Path, top_k: int, concurrency: int, only: list[str] | None = None,
                  limit: int = 0) -> None:
    """Searches every question of SETS once and writes one JSON line per
    question: set, id, query, keywords, results (Candidate as JSON), error."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    channel = grpc.aio.insecure_channel(gateway)
    stub = gateway_pb2_grpc.GatewayServiceStub(channel)
    gate = asyncio.Semaphore(concurrency)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a" if only else "w", encoding="utf-8") as f:
        for name, path in SETS.items():
            if only and name not in only:
                continue
            rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
            if limit and name != OOD:
                rows = rows[:limit]

            async def one(row: dict) -> dict:
                record = {"set": name, "id": str(row.get("id")), "query": row["query"]}
                async with gate:
                    try:
                        reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=top_k), timeout=120)
                    except grpc.aio.AioRpcError as err:
                        return {**record, "error": f"{err.code().name}: {err.details()[:120]}"}
                record["keywords"] = list(reply.query_info.keywords)
                record["embedding_model"] = reply.query_info.embedding_model
                record["results"] = [json_format.MessageToDict(c) for c in reply.results]
                return record

            records = await asyncio.gather(*(one(r) for r in rows))
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            print(f"{name}: {len(records)} searched, {sum('error' in r for r in records)} errors", flush=True)
    await channel.close()


def load(evidence: Path) -> dict[str, list[tuple[str, abstention.Signals]]]:
    """{set: [(id, signals)]} of the searchable questions of ``evidence``."""
    by_set: dict[str, list[tuple[str, abstention.Signals]]] = {}
    skipped: dict[str, int] = {}
    for line in evidence.open(encoding="utf-8"):
        record = json.loads(line)
        if "error" in record:
            skipped[record["set"]] = skipped.get(record["set"], 0) + 1
            continue
        results = [json_format.ParseDict(c, types_pb2.Candidate()) for c in record["results"]]
        by_set.setdefault(record["set"], []).append((record["id"], abstention.signals(record["keywords"], results)))
    for name, n in skipped.items():
        print(f"note: {n} {name} questions not searchable (the gateway refused them) and left out")
    return by_set


def split(items: list, seed: int) -> tuple[list, list]:
    """Seeded half split by id: (fitting half, held-out half)."""
    ids = sorted(i for i, _ in items)
    random.Random(seed).shuffle(ids)
    fit = set(ids[: len(ids) // 2])
    return [s for i, s in items if i in fit], [s for i, s in items if i not in fit]


def matrix(sigs: list[abstention.Signals]) -> np.ndarray:
    return np.array([s.vector() for s in sigs], dtype=float).reshape(len(sigs), len(abstention.SIGNALS))


def fit_logistic(x: np.ndarray, y: np.ndarray, active: list[int], sample: np.ndarray,
                 l2: float = 1e-3) -> tuple[np.ndarray, float]:
    """L2 logistic regression with per-sample weights ``sample`` by
    Newton's method on the ``active`` columns; returns (weights over every
    column, bias)."""
    xb = np.hstack([x[:, active], np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    reg = l2 * np.diag(np.r_[np.ones(len(active)), 0.0])
    for _ in range(100):
        p = 1 / (1 + np.exp(-(xb @ w)))
        grad = xb.T @ (sample * (p - y)) + reg @ w
        hess = (xb.T * (sample * p * (1 - p))) @ xb + reg
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    full = np.zeros(x.shape[1])
    full[active] = w[:-1]
    return full, float(w[-1])


def rates(data: dict[str, list[abstention.Signals]], weights, bias: float, threshold: float) -> dict[str, float]:
    """OOD abstention rate and each law set's answer rate."""
    out = {}
    for name, sigs in data.items():
        answered = [abstention.answerability(s, weights, bias) >= threshold for s in sigs]
        out[name] = round(float(np.mean([not a for a in answered]) if name == OOD else np.mean(answered)), 4)
    return out


def auc(neg: np.ndarray, pos: np.ndarray) -> float:
    """P(positive > negative), ties half."""
    return float(np.mean(neg[:, None] < pos[None, :]) + 0.5 * np.mean(neg[:, None] == pos[None, :]))


def separation(data: dict[str, list[abstention.Signals]]) -> None:
    """Per-signal quantiles per set and AUC (law set vs OOD)."""
    print("separation (p05 / p50 / p95 per set; AUC of each law set against OOD):")
    for k, name in enumerate(abstention.SIGNALS):
        cols = {s: matrix(v)[:, k] for s, v in data.items()}
        quant = "  ".join(f"{s} {np.quantile(c, .05):.3f}/{np.quantile(c, .5):.3f}/{np.quantile(c, .95):.3f}" for s, c in cols.items())
        aucs = "  ".join(f"{s} {auc(cols[OOD], c):.3f}" for s, c in cols.items() if s != OOD)
        print(f"  {name:14s} {quant}\n  {'':14s} AUC {aucs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--gateway", default="127.0.0.1:50051")
    c.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "abstention_evidence.jsonl")
    c.add_argument("--top-k", type=int, default=10)
    c.add_argument("--concurrency", type=int, default=2)
    c.add_argument("--only", nargs="*", help="search only these sets and append to --out")
    c.add_argument("--limit", type=int, default=0, help="first N questions of each answerable set (0 = all)")
    f = sub.add_parser("fit")
    f.add_argument("--evidence", type=Path, default=REPO / "bench" / "results" / "abstention_evidence.jsonl")
    f.add_argument("--seed", type=int, default=12)
    f.add_argument("--check", action="store_true", help="evaluate the module's fit for --model, do not fit")
    f.add_argument("--model", default=abstention.DEFAULT_MODEL, help="embedding model of the evidence")
    args = parser.parse_args()
    if args.cmd == "collect":
        asyncio.run(collect(args.gateway, args.out, args.top_k, args.concurrency, args.only, args.limit))
        return

    by_set = load(args.evidence)
    halves = {s: split(items, args.seed) for s, items in by_set.items()}
    fit = {s: h[0] for s, h in halves.items()}
    held = {s: h[1] for s, h in halves.items()}
    whole = {s: [sig for _, sig in items] for s, items in by_set.items()}
    print("questions:", {s: len(v) for s, v in whole.items()}, "fitting half:", {s: len(v) for s, v in fit.items()})
    separation(whole)
    if args.check:
        fit_ = abstention.pack_fits([domains.LAW_ZH])[args.model]
        weights, bias, threshold = fit_.weights, fit_.bias, abstention.THRESHOLD
    else:
        x = np.vstack([matrix(fit[s]) for s in fit])
        y = np.concatenate([np.full(len(fit[s]), 0.0 if s == OOD else 1.0) for s in fit])
        law_sets = [s for s in fit if s != OOD]
        # OOD weighs half, the law sets share the other half equally.
        sample = np.concatenate([np.full(len(fit[s]), 0.5 / len(fit[s]) if s == OOD else 0.5 / len(law_sets) / len(fit[s]))
                                 for s in fit]) * len(y)
        active = list(range(len(abstention.SIGNALS)))
        while True:
            weights, bias = fit_logistic(x, y, active, sample)
            negative = [k for k in active if weights[k] < 0]
            print("fitted:", {abstention.SIGNALS[k]: round(float(weights[k]), 3) for k in active}, "bias", round(bias, 3))
            if not negative:
                break
            worst = min(negative, key=lambda k: weights[k])
            print(f"  dropping {abstention.SIGNALS[worst]} (negative weight: more of it would mean less answerable)")
            active.remove(worst)
        scores = {s: np.array([abstention.answerability(sig, weights, bias) for sig in v]) for s, v in fit.items()}
        best = (-1.0, 0.5)
        for t in np.unique(np.concatenate(list(scores.values()))):
            low = min(float(np.mean(scores[s] < t)) if s == OOD else float(np.mean(scores[s] >= t)) for s in scores)
            if low > best[0]:
                best = (low, float(t))
        # The best threshold is one question's own score: move it halfway
        # (in logit) to the next lower score, so that rounding the printed
        # constants does not flip that question.
        lower = np.unique(np.concatenate(list(scores.values())))
        lower = lower[lower < best[1]]
        threshold = best[1]
        if len(lower):
            mid = (np.log(best[1] / (1 - best[1])) + np.log(lower[-1] / (1 - lower[-1]))) / 2
            threshold = float(1 / (1 + np.exp(-mid)))
    logit = float(np.log(threshold / (1 - threshold)))
    folded = bias - logit
    print(f"\nconstants ({args.model}): weights ({', '.join(f'{w:.3f}' for w in weights)}) over "
          f"{', '.join(abstention.SIGNALS)}; bias {bias:.3f}; threshold {threshold:.4f}")
    shown = ", ".join(f"{w:.3f}" for w in weights)
    print(f'  recipes.json "abstention" "fits" "{args.model}": {{"weights": [{shown}], "bias": {folded:.3f}}}'
          f"  # threshold folded in: answer at answerability >= {abstention.THRESHOLD}")
    for k, name in enumerate(abstention.SIGNALS[:2]):
        rest = [w for j, w in enumerate(weights) if j != k]
        if weights[k] > 0:
            base = -folded / weights[k]
            extra = f" ({base - weights[2] / weights[k]:.3f} with the longest word found)" if weights[2] > 0 and not any(
                w for j, w in enumerate(weights) if j not in (k, 2)) else ""
            if not any(rest) or extra:
                print(f"  = abstain when {name} < {base:.3f}{extra}")
    print("\nOOD abstention rate / law answer rate:")
    for label, data in (("fitting half", fit), ("held-out half", held), ("whole", whole)):
        print(f"  {label:14s}", rates(data, weights, bias, threshold))


if __name__ == "__main__":
    main()
