"""A second own-documents set (issue 24): the laws that the law dev sets'
questions cite, written as plain-text files, asked with those questions and
scored by gold passage text, so the generic path (no domain pack) is
measured on long Chinese documents and real lay questions, and choices
fitted on the documents dev set (tests/quality/data/queries-docs-dev.jsonl,
three design documents) can be checked on documents they were not fitted on.

    python bench/laws_as_files.py build                # -> bench/results/laws_as_files/
    graphmesh up --detach
    graphmesh ingest files bench/results/laws_as_files/files --collection lawfiles
    graphmesh eval --dataset bench/results/laws_as_files/queries-scenario.jsonl --collection lawfiles --answers
    graphmesh eval --dataset bench/results/laws_as_files/queries-consult.jsonl --collection lawfiles --answers

Files: every law in force (status 现行有效) holding a gold article of a
scenario or consult dev question, one file per law: its name, then its
chapters and sections as 第…章 / 第…节 lines (the .txt reader's headings),
then each article as "第X条 text" on its own line. Questions: those whose
gold articles include one in those files; gold_text = each such article's
number and the first GOLD_CHARS characters of its text (a chunk that holds
the article's start holds it; whitespace is ignored when matching). Ranks
then count chunks, as on the documents dev set, not articles.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, SHARED_DATA  # noqa: E402

IN_FORCE = "现行有效"
GOLD_CHARS = 30
OUT = RESULTS / "laws_as_files"
SETS = ("scenario", "consult")


def law_file(articles: list[dict]) -> str:
    """One law as text: its name, chapter and section lines where they
    change, each article as "第X条 text" (``articles`` in corpus order)."""
    lines = [articles[0]["law"], ""]
    chapter = section = None
    for a in articles:
        if a.get("chapter") and a["chapter"] != chapter:
            chapter, section = a["chapter"], None
            lines += ["", a["chapter"]]
        if a.get("section") and a["section"] != section:
            section = a["section"]
            lines.append(a["section"])
        lines.append(f"{a['article']} {' '.join(a['text'].split())}")
    return "\n".join(lines) + "\n"


def gold_text(article: dict) -> str:
    return f"{article['article']} {' '.join(article['text'].split())[:GOLD_CHARS]}"


def build(out: Path) -> None:
    with gzip.open(SHARED_DATA / "law-zh" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f]
    by_id = {a["id"]: a for a in corpus}
    questions = {s: [json.loads(line) for line in (SHARED_DATA / "law-zh" / f"queries-{s}-dev.jsonl").open(encoding="utf-8")]
                 for s in SETS}
    laws = {by_id[g]["law"] for qs in questions.values() for q in qs for g in q["gold"] if by_id[g]["status"] == IN_FORCE}
    articles: dict[str, list[dict]] = defaultdict(list)
    for a in corpus:
        if a["law"] in laws and a["status"] == IN_FORCE:
            articles[a["law"]].append(a)
    (out / "files").mkdir(parents=True, exist_ok=True)
    for law, arts in articles.items():
        (out / "files" / f"{law}.txt").write_text(law_file(arts), encoding="utf-8")
    held = {a["id"] for arts in articles.values() for a in arts}
    for name, qs in questions.items():
        rows = []
        for q in qs:
            golds = [gold_text(by_id[g]) for g in q["gold"] if g in held]
            if golds:
                rows.append({"id": q["id"], "query": q["query"], "gold_text": golds, "reference": q.get("reference", "")})
        path = out / f"queries-{name}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        print(f"{name}: {len(rows)} of {len(qs)} questions -> {path}")
    print(f"{len(articles)} laws, {len(held)} articles, {sum(len(law_file(a)) for a in articles.values()):,} characters "
          f"-> {out / 'files'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    build(args.out)


if __name__ == "__main__":
    main()
