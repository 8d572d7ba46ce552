"""The law pack's offence lookup by characters alone against characters and
meaning, on the law facts dev questions (each names its offence: 罪名：X).

Builds law_zh's DocIndex over every penal article of the corpus (as the
graph retriever does: amending acts left out), embeds the articles'
texts passage-side and each question's offence names ("X罪") query-side with
an in-process embedder (default e5onnx, the mesh's default), and ranks the
penal articles with ``offence_hits`` twice: without probe vectors (the
character match) and with them (``offence_scores``: the mean of the
character score and the min-max scaled cosine). Reports, per question, the
rank of the first gold article among the lookup's hits (top 20, the channel's
depth in the mesh), R@1 / R@3 / R@10 / MRR@10 and the paired bootstrap
interval of each delta (services.cli.significance).

    python bench/offence_dense_probe.py [--embedder e5onnx] [--limit N]

A minute on 2 cores (377 articles and 171 questions embedded). The rule's
form (a plain mean, both halves in [0, 1]) was chosen among min-max and
max-relative scalings at weights 0.5 to 2 on this same set: every variant
with the cosine reached 120-123 first and 143-149 in the top 10, so the
choice is not what moves the figure. Figures: docs/benchmarks.md,
"Offence names matched by meaning".
"""
from __future__ import annotations

import argparse
import gzip
import json
import time

from _common import LAW_CORPUS, SHARED_DATA, save
from domains.law_zh import references as lr
from domains.law_zh.lookup_index import DocIndex
from domains.law_zh.lookups import offence_names
from services.cli.significance import compare_ranks
from services.common.text import query_keywords
from services.expander.embedding import build_embedder

FACTS_DEV = SHARED_DATA / "law-zh" / "queries-facts-dev.jsonl"
#: Hits the channel returns per question in the mesh (the fuser's depth per channel).
DEPTH = 20


def penal_articles() -> list[tuple[str, str, list[str]]]:
    """(id, text, acts) of every penal article outside amending acts."""
    out = []
    with gzip.open(LAW_CORPUS, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if lr.amended_law(row["law"]):
                continue
            acts = lr.find_offences(row["text"])
            if acts:
                out.append((str(row["id"]), row["text"], acts))
    return out


def first_rank(hits, gold: set[str]) -> int | None:
    for rank, hit in enumerate(hits[:10], 1):
        if hit.doc_id in gold:
            return rank
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="e5onnx")
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    articles = penal_articles()
    index = DocIndex([], [], [(doc, f"{doc}#0", acts) for doc, _, acts in articles], query_keywords)
    embedder = build_embedder(args.embedder)
    started = time.perf_counter()
    index.attach_vectors(embedder.embed([text for _, text, _ in articles], query=False))
    embed_s = time.perf_counter() - started
    questions = [json.loads(line) for line in FACTS_DEV.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.limit:
        questions = questions[:args.limit]
    ranks: dict[str, dict[str, int | None]] = {"characters": {}, "characters+meaning": {}}
    for q in questions:
        gold = {str(g) for g in q["gold"]}
        probes = index.probes("graph.offence", q["query"])
        vectors = embedder.embed(probes, query=True) if probes else None
        ranks["characters"][q["id"]] = first_rank(index.offence_hits(q["query"], DEPTH), gold)
        ranks["characters+meaning"][q["id"]] = first_rank(index.offence_hits(q["query"], DEPTH, probe_vectors=vectors), gold)
    named = sum(1 for q in questions if offence_names(q["query"]))
    print(f"{len(articles)} penal articles embedded in {embed_s:.1f} s; {len(questions)} questions, {named} name an offence")
    figures = {"penal_articles": len(articles), "questions": len(questions), "embedder": args.embedder, "ranks": ranks}
    for arm, by_id in ranks.items():
        r = [x for x in by_id.values()]
        print(f"{arm:20s} R@1 {sum(x == 1 for x in r if x):3d}  R@3 {sum(1 for x in r if x and x <= 3):3d}  "
              f"R@10 {sum(1 for x in r if x):3d}  of {len(r)}")
    deltas = compare_ranks(ranks["characters"], ranks["characters+meaning"], ("recall@1", "recall@10", "mrr@10"))
    figures["deltas"] = {m: d.as_dict() for m, d in deltas.items()}
    for metric, d in deltas.items():
        print(f"  {metric:10s} {d.a:.3f} -> {d.b:.3f}  {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}] p {d.p_value:.4f}")
    save("offence_dense_probe", figures)


if __name__ == "__main__":
    main()
