"""Probe of a vocabulary bridge for lay questions (issue 23 item 3): each
query word gets the corpus terms nearest to it in the embedding space
(e5onnx, query side, "query: <term>"), added to the BM25 query at a weight
scaled by their cosine similarity. Measured in process beside the naive
hybrid (bench/naive_hybrid.py: jieba cut_for_search + BM25 over heading
path and text, exact dot product over the stored chunk vectors, RRF k=60
over the top 100 of each), BM25 alone and hybrid, with the bridge's
parameters chosen by 5-fold cross-validation over the pooled questions and
paired bootstrap intervals of the held-out folds' gain
(services/cli/significance.py).

Vocabulary: every corpus token of at least two characters found in at
least 2 chunks. Term vectors come from the running expander's Embed RPC and
are cached under bench/results/ (a first run embeds ~40k terms: minutes).

    graphmesh up   # the law corpus in the default collection
    python bench/vocab_bridge_probe.py [--sets consult,scenario] [--limit N]
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import SHARED_DATA, save, stack_dsn  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from naive_hybrid import DEPTH, first_gold, load_chunks, query_vectors, rrf, tokens  # noqa: E402

from services.cli.evaluate import load_dataset  # noqa: E402
from services.cli.significance import RANK_METRICS, compare_ranks, rank_metric  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402

K1, B = 1.5, 0.75
CACHE = Path(__file__).resolve().parent / "results" / "vocab_bridge_terms.npz"


class WeightedBm25:
    """Okapi BM25 (k1 1.5, b 0.75, Lucene idf) whose query terms carry weights."""

    def __init__(self, docs_tokens: list[list[str]]):
        self.vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        lengths = np.array([len(t) for t in docs_tokens], dtype=np.float32)
        avg = float(lengths.mean())
        for i, toks in enumerate(docs_tokens):
            for term, tf in Counter(toks).items():
                j = self.vocab.setdefault(term, len(self.vocab))
                rows.append(i)
                cols.append(j)
                vals.append(tf)
        tf = sp.csc_matrix((np.array(vals, dtype=np.float32), (rows, cols)), shape=(len(docs_tokens), len(self.vocab)))
        self.df = np.diff(tf.indptr)
        idf = np.log(1 + (len(docs_tokens) - self.df + 0.5) / (self.df + 0.5)).astype(np.float32)
        tf = tf.tocoo()
        norm = K1 * (1 - B + B * lengths[tf.row] / avg)
        weights = tf.data * (K1 + 1) / (tf.data + norm) * idf[tf.col]
        self.matrix = sp.csc_matrix((weights, (tf.row, tf.col)), shape=tf.shape)

    def scores(self, weighted_terms: dict[str, float]) -> np.ndarray:
        cols = [self.vocab[t] for t in weighted_terms if t in self.vocab]
        if not cols:
            return np.zeros(self.matrix.shape[0], dtype=np.float32)
        w = np.array([weighted_terms[t] for t in weighted_terms if t in self.vocab], dtype=np.float32)
        return np.asarray(self.matrix[:, cols] @ w).ravel()


def bridge_vocabulary(bm25: WeightedBm25) -> list[str]:
    return sorted(t for t, j in bm25.vocab.items() if len(t) >= 2 and bm25.df[j] >= 2 and not t.isascii())


async def term_vectors(address: str, terms: list[str]) -> np.ndarray:
    if CACHE.exists():
        cached = np.load(CACHE, allow_pickle=False)
        if list(cached["terms"]) == terms:
            return cached["vectors"]
    started = time.perf_counter()
    vectors = await query_vectors(address, terms)
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(CACHE, terms=np.array(terms), vectors=vectors)
    print(f"{len(terms)} term vectors in {time.perf_counter() - started:.0f} s", flush=True)
    return vectors


def neighbours(query_terms: list[str], vocab_terms: list[str], vocab_vectors: np.ndarray,
               word_vectors: dict[str, np.ndarray], top: int) -> dict[str, list[tuple[str, float]]]:
    """Each query word's ``top`` nearest vocabulary terms (term, cosine), itself excluded."""
    out = {}
    for word in query_terms:
        sims = vocab_vectors @ word_vectors[word]
        best = np.argpartition(-sims, top + 1)[:top + 1]
        out[word] = [(vocab_terms[i], float(sims[i])) for i in best[np.argsort(-sims[best])] if vocab_terms[i] != word][:top]
    return out


def bridged_query(words: list[str], near: dict[str, list[tuple[str, float]]], df: dict[str, int],
                  top: int, threshold: float, weight: float, max_df: int) -> dict[str, float]:
    """BM25 query weights: the query's words at 1, and for each word with at
    most ``max_df`` chunks (lay words are rare in statutes) its ``top``
    neighbours of cosine >= ``threshold`` at weight * cosine."""
    query = {w: 1.0 for w in words}
    for word in words:
        if df.get(word, 0) > max_df or len(word) < 2:
            continue
        for term, sim in near.get(word, [])[:top]:
            if sim >= threshold and term not in query:
                query[term] = max(query.get(term, 0.0), weight * sim)
    return query


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="consult,scenario")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    use_local_mesh_token()
    addresses = MeshAddresses()
    dsn = stack_dsn()
    docs, texts, vectors = asyncio.run(load_chunks(dsn))
    bm25 = WeightedBm25([tokens(t) for t in texts])
    vocab_terms = bridge_vocabulary(bm25)
    print(f"{len(docs)} chunks, {len(bm25.vocab)} terms, bridge vocabulary {len(vocab_terms)}", flush=True)
    vocab_vectors = asyncio.run(term_vectors(addresses.expander_addr, vocab_terms))
    df = {t: int(bm25.df[j]) for t, j in bm25.vocab.items()}

    questions = []
    for name in args.sets.split(","):
        for q in load_dataset(SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl", args.limit or None):
            questions.append((f"{name}:{q['id']}", q["query"], set(map(str, q["gold"]))))
    qvecs = asyncio.run(query_vectors(addresses.expander_addr, [q for _, q, _ in questions]))
    words_per_q = [list(dict.fromkeys(tokens(q))) for _, q, _ in questions]
    all_words = sorted({w for ws in words_per_q for w in ws})
    word_vectors = dict(zip(all_words, asyncio.run(query_vectors(addresses.expander_addr, all_words))))
    near_per_q = [neighbours(ws, vocab_terms, vocab_vectors, word_vectors, 5) for ws in words_per_q]
    dense_tops = [np.argsort(-(vectors @ v))[:DEPTH] for v in qvecs]

    # e5's cosines crowd near 0.9 ("我" -> "自我" 0.93), so the thresholds sit high.
    grid = list(itertools.product((2, 5), (0.90, 0.93, 0.95), (0.2, 0.5), (0, 20, 200, math.inf)))
    # ranks[config][system][qid]; config None = no bridge
    ranks: dict = {}
    for config in [None, *grid]:
        per = {"bm25": {}, "hybrid": {}}
        for (qid, _, gold), words, near, dense_top in zip(questions, words_per_q, near_per_q, dense_tops):
            query = {w: 1.0 for w in words} if config is None else bridged_query(words, near, df, *config)
            top = np.argsort(-bm25.scores(query))[:DEPTH]
            per["bm25"][qid] = first_gold([docs[i] for i in top], gold)
            per["hybrid"][qid] = first_gold([docs[i] for i in rrf(top, dense_top)], gold)
        ranks[config] = per
    print(f"{len(grid)} bridge settings measured", flush=True)

    ids = [qid for qid, _, _ in questions]
    random.Random(0).shuffle(ids)
    folds = [set(ids[i::args.folds]) for i in range(args.folds)]
    report: dict = {"n": len(ids), "vocabulary": len(vocab_terms), "systems": {}}
    for system in ("bm25", "hybrid"):
        cv: dict[str, int | None] = {}
        chosen = []
        for held in folds:
            def train_mrr(config):
                return np.mean([rank_metric("mrr@10", ranks[config][system][q]) for q in ids if q not in held])
            best = max(grid, key=train_mrr)
            chosen.append(best)
            cv.update({q: ranks[best][system][q] for q in held})
        base = ranks[None][system]
        entry = {"base": {m: float(np.mean([rank_metric(m, r) for r in base.values()])) for m in RANK_METRICS},
                 "cross_validated": {m: float(np.mean([rank_metric(m, r) for r in cv.values()])) for m in RANK_METRICS},
                 "gain": {m: d.as_dict() for m, d in compare_ranks(base, cv).items()},
                 "chosen": [str(c) for c in chosen]}
        for name in args.sets.split(","):
            part_base = {q: r for q, r in base.items() if q.startswith(name + ":")}
            part_cv = {q: r for q, r in cv.items() if q.startswith(name + ":")}
            entry[f"gain_{name}"] = {m: d.as_dict() for m, d in compare_ranks(part_base, part_cv).items()}
        report["systems"][system] = entry
        print(f"\n== {system}: chosen per fold (top, threshold, weight, max_df): {entry['chosen']}")
        print("  base " + " / ".join(f"{entry['base'][m]:.3f}" for m in RANK_METRICS)
              + "   cross-validated bridge " + " / ".join(f"{entry['cross_validated'][m]:.3f}" for m in RANK_METRICS))
        for key in ["gain", *(f"gain_{n}" for n in args.sets.split(","))]:
            print(f"  {key:14s} " + "  ".join(f"{m} {d['delta']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
                                               for m, d in entry[key].items()))
    example = next(i for i, ws in enumerate(words_per_q) if ws)
    print("\nexample:", questions[example][1][:60], {w: near_per_q[example][w][:3] for w in words_per_q[example][:6]})
    save("vocab_bridge_probe", report)


if __name__ == "__main__":
    main()
