"""Article-number questions (benchmark data, not a test): a fixed-seed sample
of the law corpus's articles asked for by law and number, in the eval JSONL
format, for the "article lookup" row of the per-question-type table.

    python bench/article_lookup_set.py ../shared/data/law-zh/corpus.jsonl.gz OUT.jsonl [--n 100] [--numerals arabic]

Articles in force only (a number alone cannot tell versions apart). Each
question is one of "《<law>》<article>", "<law without 中华人民共和国><article>"
or "<law without 中华人民共和国><article>规定了什么？"; gold = the article's id.
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from services.common.numbers import chinese_to_int  # noqa: E402

PREFIX = "中华人民共和国"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("out")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--numerals", choices=["chinese", "arabic"], default="chinese",
                        help="arabic: the article number as users type it, 第26条 (the law_zh pack rewrites it)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in gzip.open(args.corpus, "rt", encoding="utf-8")]
    candidates = [r for r in rows if r["article"].startswith("第") and r["article"].endswith("条")
                  and r["status"] == "现行有效" and chinese_to_int(r["article"][1:-1]) is not None]
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="utf-8") as out:
        for i, r in enumerate(rng.sample(candidates, args.n)):
            short = r["law"].removeprefix(PREFIX)
            label = r["article"] if args.numerals == "chinese" else f"第{chinese_to_int(r['article'][1:-1])}条"
            query = [f"《{r['law']}》{label}", f"{short}{label}", f"{short}{label}规定了什么？"][i % 3]
            gold = [str(r["id"])]
            out.write(json.dumps({"id": f"article-{i}", "query": query, "gold": gold}, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
