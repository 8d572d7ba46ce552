"""Fits the entity vector gate (RankConfig.vector_gate) for an embedding
model on the medkg-zh alias dev set (benchmark, not a test).

For each alias query, the closest entity surfaces by cosine are found by
brute force over every surface of the library (names and aliases, embedded
as the entity ingest path embeds them: query side). Of the gold entities the
vector channel ranks in its top 10, the script prints the share a gate at
each cosine keeps, and the share of the non-gold top-10 hits it still lets
through. The gate is set where most gold stays and most noise goes; the
reference design (003, section 9) gates at 0.78 for its own model.

    python bench/entity_vector_gate.py --model e5onnx --limit 400
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

import numpy as np

from services.expander.embedding import CachedEmbedder, EmbeddingCache, build_embedder, cache_name

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "medkg-zh"
CACHE = Path.home() / ".cache" / "graphmesh" / "embeddings.sqlite"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="e5onnx")
    ap.add_argument("--limit", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    inner = build_embedder(args.model)
    embedder = CachedEmbedder(inner, EmbeddingCache(CACHE, cache_name(inner)))
    surfaces, owners = [], []
    with gzip.open(DATA / "entities.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            for s in dict.fromkeys([e["name"], *(e.get("aliases") or [])]):
                surfaces.append(s)
                owners.append(e["name"])
    vectors = np.vstack([embedder.embed_with_stats(surfaces[i:i + 512], query=True)[0]
                         for i in range(0, len(surfaces), 512)])
    queries = [json.loads(l) for l in (DATA / "queries-alias-dev.jsonl").open(encoding="utf-8")]
    queries = random.Random(args.seed).sample(queries, min(args.limit, len(queries)))
    qv = embedder.embed_with_stats([q["query"] for q in queries], query=True)[0]
    gold_scores, other_scores = [], []
    for q, v in zip(queries, qv):
        sims = vectors @ v
        best: dict[str, float] = {}
        for i in np.argsort(-sims)[:40]:
            best.setdefault(owners[i], float(sims[i]))
            if len(best) == 10:
                break
        for name, score in best.items():
            (gold_scores if name in q["gold"] else other_scores).append(score)
    gold, other = np.array(gold_scores), np.array(other_scores)
    print(f"model {args.model}: {len(queries)} alias queries, {len(surfaces)} surfaces; "
          f"gold in vector top 10: {len(gold)} ({len(gold) / len(queries):.3f}); non-gold top-10 hits: {len(other)}")
    print("gate   gold kept   non-gold let through")
    for gate in np.arange(0.60, 0.97, 0.02):
        print(f"{gate:.2f}   {np.mean(gold >= gate):.3f}       {np.mean(other >= gate):.3f}")


if __name__ == "__main__":
    main()
