"""jieba+BM25 baseline for the medkg-zh entity dev sets (benchmark, not a
test): the figure GraphMesh's SearchEntities is compared with.

One BM25 document per entity: its name, aliases, category and every fact
(predicate and object of the triples whose subject it is), tokenised with
jieba's search mode (bm25s, default k1/b); each query tokenised the same
way. Ranks count distinct entity names; top-1 = recall@1.

    python bench/medkg_bm25_baseline.py [--limit N]
"""
from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from pathlib import Path

import bm25s
import jieba
import numpy as np

from services.judge import core as metrics

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "medkg-zh"
SETS = {"alias": "queries-alias-dev.jsonl", "symptom": "queries-symptom-dev.jsonl"}


def tokens(text: str) -> list[str]:
    return [t for t in jieba.cut_for_search(text) if t.strip() and t not in "，。、：；,.:;（）() "]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    facts: dict[str, list[str]] = defaultdict(list)
    with gzip.open(DATA / "triples.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            facts[t["subject"]].append(f"{t['predicate']} {t['object']}")
    names, docs = [], []
    with gzip.open(DATA / "entities.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            names.append(e["name"])
            docs.append(tokens(" ".join([e["name"], *(e.get("aliases") or []), e.get("category") or "", *facts[e["name"]]])))
    bm25 = bm25s.BM25()
    bm25.index(docs, show_progress=False)
    names_arr = np.array(names)
    for set_name, file in SETS.items():
        rows = [json.loads(l) for l in (DATA / file).open(encoding="utf-8")][: args.limit]
        top1 = r10 = mrr = 0.0
        for row in rows:
            q = tokens(row["query"]) or [row["query"]]
            ids, _ = bm25.retrieve([q], k=10, show_progress=False)
            ranked = metrics.dedupe(list(names_arr[ids[0]]))
            gold = set(row["gold"])
            top1 += metrics.hit_at(ranked, gold, 1)
            r10 += metrics.hit_at(ranked, gold, 10)
            mrr += metrics.mrr_at(ranked, gold, 10)
        n = len(rows)
        print(json.dumps({"set": set_name, "n": n, "top1": round(top1 / n, 4), "recall@10": round(r10 / n, 4),
                          "mrr@10": round(mrr / n, 4)}))


if __name__ == "__main__":
    main()
