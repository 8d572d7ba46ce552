"""Hubness correction of the dense channel (tried, 2026-12-05, not kept; not a test).

A few chunks are near every query in e5's compressed cosine space (an
overview diagram, a feature list) and rank high for questions they do not
answer. CSLS-style correction (Lample et al. 2018, "Word translation without
parallel data", section 2.3) scores a chunk d for a query q as
cos(q, d) - lam * r_d, with r_d the mean cosine of d to its K nearest other
chunks. This probe measures it over the stored vectors of the running
stack, dense alone and in the naive hybrid (bench/naive_hybrid.py: jieba +
BM25, RRF k=60), on each law dev set, with paired bootstrap intervals
against lam = 0:

    graphmesh up   # the law corpus in (make demo's stack)
    python bench/hubness_probe.py [--k 10] [--lams 0.25,0.5,1.0]

Needs the `bench` extra (bm25s). Figures: docs/benchmarks.md "Hubness
correction of the dense channel".
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import SHARED_DATA, save, stack_dsn  # noqa: E402
from naive_hybrid import DEPTH, first_gold, fold, load_chunks, query_vectors, rrf, tokens  # noqa: E402

import bm25s  # noqa: E402
import numpy as np  # noqa: E402

from services.cli.evaluate import load_dataset  # noqa: E402
from services.cli.significance import RANK_METRICS, compare_ranks, rank_metric  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402


def hub_scores(vectors: np.ndarray, k: int, block: int = 2048) -> np.ndarray:
    """r_d for every row of ``vectors`` (unit rows): the mean cosine to its
    ``k`` nearest other rows, computed in blocks of ``block`` rows."""
    out = np.zeros(len(vectors), dtype=np.float32)
    for start in range(0, len(vectors), block):
        sims = vectors[start:start + block] @ vectors.T
        sims[np.arange(len(sims)), np.arange(start, start + len(sims))] = -1.0  # not its own neighbour
        out[start:start + block] = np.partition(sims, -k, axis=1)[:, -k:].mean(axis=1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="scenario,consult,facts")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--lams", default="0.25,0.5,1.0")
    parser.add_argument("--dsn", default="")
    args = parser.parse_args()
    use_local_mesh_token()
    docs, texts, vectors = asyncio.run(load_chunks(stack_dsn(args.dsn)))
    started = time.perf_counter()
    hubs = hub_scores(vectors, args.k)
    print(f"{len(docs)} chunks; r_d (k={args.k}) in {time.perf_counter() - started:.1f} s: "
          f"mean {hubs.mean():.4f}, sd {hubs.std():.4f}", flush=True)
    bm25 = bm25s.BM25()
    bm25.index([tokens(t) for t in texts], show_progress=False)
    lams = [0.0, *map(float, args.lams.split(","))]
    report: dict = {"k": args.k, "sets": {}}
    for name in args.sets.split(","):
        dataset = load_dataset(SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl")
        qvecs = asyncio.run(query_vectors(MeshAddresses().expander_addr, [q["query"] for q in dataset]))
        bm25_tops = [np.argsort(-bm25.get_scores(tokens(q["query"])))[:DEPTH] for q in dataset]
        ranks: dict[float, dict[str, dict[str, int | None]]] = {}
        for lam in lams:
            dense, hybrid = {}, {}
            for q, qvec, bm25_top in zip(dataset, qvecs, bm25_tops):
                gold = set(map(str, q["gold"]))
                dense_top = np.argsort(-(vectors @ qvec - lam * hubs))[:DEPTH]
                dense[str(q["id"])] = first_gold(fold(dense_top, docs), gold)
                hybrid[str(q["id"])] = first_gold([docs[i] for i in rrf(bm25_top, dense_top)], gold)
            ranks[lam] = {"dense": dense, "naive_hybrid": hybrid}
        entry = report["sets"].setdefault(name, {})
        for lam in lams:
            for system in ("dense", "naive_hybrid"):
                means = [float(np.mean([rank_metric(m, r) for r in ranks[lam][system].values()])) for m in RANK_METRICS]
                line = f"{name:9s} lam={lam:<4g} {system:12s} " + " / ".join(f"{v:.3f}" for v in means)
                if lam:
                    deltas = compare_ranks(ranks[0.0][system], ranks[lam][system])
                    line += "   vs lam=0: " + "  ".join(f"{m} {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
                                                       for m, d in deltas.items())
                    entry[f"{system}@{lam:g}"] = {m: d.as_dict() for m, d in deltas.items()}
                print(line, flush=True)
    save("hubness_probe", report)


if __name__ == "__main__":
    main()
