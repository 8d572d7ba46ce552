"""Laws written as plain-text files, with the law dev questions that cite
them and gold passages given as text: own documents for the generic path
(no domain pack), on long Chinese documents and real lay questions that
nothing was fitted on (issue 24). ``bench/laws_as_files.py`` writes every
cited law; the quality gate (test_law_files_quality.py) takes the
``GATE_LAWS`` below.

A file is the law's name, then its chapters and sections as 第…章 / 第…节
lines (the .txt reader's headings) where they change, then each article as
"第X条 text" on a line of its own. A question's gold passages are the
number and first ``GOLD_CHARS`` characters of each gold article held in the
files (a chunk that holds the article's start holds it; whitespace is
ignored when matching), so ranks count chunks, as on the documents set.
"""
from __future__ import annotations

from collections import defaultdict

from tests.quality.samples import _law_dir, _read_jsonl, law_corpus

IN_FORCE = "现行有效"
GOLD_CHARS = 30
SETS = ("scenario", "consult")
#: The gate's laws: the most cited by the scenario and consult dev questions among laws of at
#: most 300 articles, until 1,600 articles (15 laws, 1,573 articles, 108 + 83 questions).
GATE_LAWS = (
    "中华人民共和国劳动合同法", "中华人民共和国社会保险法", "中华人民共和国公司法", "中华人民共和国证券法",
    "中华人民共和国妇女权益保障法", "中华人民共和国劳动争议调解仲裁法", "中华人民共和国行政诉讼法",
    "中华人民共和国消费者权益保护法", "中华人民共和国合伙企业法", "中华人民共和国劳动法", "中华人民共和国职业病防治法",
    "中华人民共和国道路交通安全法", "中华人民共和国农民专业合作社法", "中华人民共和国农村土地承包经营纠纷调解仲裁法",
    "中华人民共和国户口登记条例",
)


def law_file(articles: list[dict]) -> str:
    """One law as text (see the module doc); ``articles`` in corpus order."""
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
    """The gold passage of ``article``: its number and first GOLD_CHARS characters."""
    return f"{article['article']} {' '.join(article['text'].split())[:GOLD_CHARS]}"


def cited_laws() -> set[str]:
    """Every law in force that holds a gold article of a scenario or consult dev question."""
    by_id = {a["id"]: a for a in law_corpus()}
    return {by_id[g]["law"] for s in SETS for q in _read_jsonl(_law_dir() / f"queries-{s}-dev.jsonl")
            for g in q["gold"] if by_id[g]["status"] == IN_FORCE}


def law_files(laws: set[str] | tuple[str, ...]) -> tuple[dict[str, str], dict[str, list[dict]]]:
    """({file name: text} of ``laws`` in force, {set name: questions}) where
    the questions are the scenario and consult dev questions with a gold
    article in those files, as {"id", "query", "gold_text": [...], "reference"}."""
    articles: dict[str, list[dict]] = defaultdict(list)
    for a in law_corpus():
        if a["law"] in laws and a["status"] == IN_FORCE:
            articles[a["law"]].append(a)
    held = {a["id"]: a for arts in articles.values() for a in arts}
    questions = {}
    for name in SETS:
        rows = []
        for q in _read_jsonl(_law_dir() / f"queries-{name}-dev.jsonl"):
            golds = [gold_text(held[g]) for g in q["gold"] if g in held]
            if golds:
                rows.append({"id": str(q["id"]), "query": q["query"], "gold_text": golds, "reference": q.get("reference", "")})
        questions[name] = rows
    return {f"{law}.txt": law_file(arts) for law, arts in articles.items()}, questions
