"""The document graph's in-memory lookups (articles, terms, offences) and the
PPR they feed, on real articles of /work/shared/data/law-zh (ids are that
corpus's ids)."""
from __future__ import annotations

import pytest

from services.common.text import query_keywords
from domains.law_zh import references as lr
from domains.law_zh.lookups import offence_names
from domains.facts import ArticleEntry, TermEntry
from domains.law_zh.lookup_index import DocIndex
from services.retriever_graph.ppr import personalized_pagerank

pytestmark = pytest.mark.unit

# 刑法 第六十七条 (4777), 专利法 第二条 (2), 刑法 第二百六十六条 (5005), 第二百三十四条 (4966), 第三百零二条 (5047).
SURRENDER = "犯罪以后自动投案，如实供述自己的罪行的，是自首。对于自首的犯罪分子，可以从轻或者减轻处罚。"
PATENT = ("本法所称的发明创造是指发明、实用新型和外观设计。\n发明，是指对产品、方法或者其改进所提出的新的技术方案。\n"
          "实用新型，是指对产品的形状、构造或者其结合所提出的适于实用的新的技术方案。")
FRAUD = "诈骗公私财物，数额较大的，处三年以下有期徒刑、拘役或者管制，并处或者单处罚金。"
INJURY = "故意伤害他人身体的，处三年以下有期徒刑、拘役或者管制。"
CORPSE = "盗窃、侮辱、故意毁坏尸体、尸骨、骨灰的，处三年以下有期徒刑、拘役或者管制。"


def index() -> DocIndex:
    articles = [
        ArticleEntry("4777", "刑法", "67", "已被修改", False, "4777#0"),
        ArticleEntry("4966", "刑法", "234", "已被修改", False, "4966#0"),
        ArticleEntry("5005", "刑法", "266", "已被修改", False, "5005#0"),
        ArticleEntry("2", "专利法", "2", "现行有效", True, "2#0"),
    ]
    terms = []
    for doc, law, text in (("4777", "刑法", SURRENDER), ("2", "专利法", PATENT)):
        for d in lr.find_definitions(text):
            terms.append(TermEntry(d.term, law, d.definition, d.kind, [(doc, f"{doc}#0", doc == "2")]))
    offences = [(doc, f"{doc}#0", lr.find_offences(text)) for doc, text in
                (("5005", FRAUD), ("4966", INJURY), ("5047", CORPSE))]
    return DocIndex(articles, terms, offences, query_keywords, version=1)


def test_defined_term_is_found_from_a_lay_word():
    query = "我弟弟犯事以后自己去派出所投案了，也如实交代了，能从轻处罚吗？"
    hits = index().term_hits(query, query_keywords(query))
    assert [h.doc_id for h in hits][:1] == ["4777"]
    assert hits[0].evidence.startswith("lay:自首")
    assert index().lay_terms(query, query_keywords(query)) == ["自首"]


def test_a_term_named_in_the_query_finds_its_defining_article():
    query = "什么是实用新型？"
    hits = index().term_hits(query, query_keywords(query))
    assert hits[0].doc_id == "2" and hits[0].evidence == "term:实用新型"


def test_article_lookup_is_exact():
    idx = index()
    assert [h.doc_id for h in idx.article_hits("刑法第二百三十四条")] == ["4966"]
    assert [h.doc_id for h in idx.article_hits("《中华人民共和国刑法》第六十七条是什么")] == ["4777"]
    assert idx.article_hits("第二百三十四条") == []           # no law named
    assert idx.article_hits("民法典第二百三十四条") == []     # law not stored


def test_offences_of_a_case_description():
    assert offence_names("经审理查明……\n罪名:诈骗。") == ["诈骗"]
    assert offence_names("其行为已构成故意伤害罪") == ["故意伤害"]
    hits = index().offence_hits("被告人陈某隐瞒事实骗取货款24160元。\n罪名:诈骗。")
    assert hits[0].doc_id == "5005" and hits[0].evidence == "offence:诈骗"
    assert index().offence_hits("被告人陈某隐瞒事实骗取货款") == []  # names no offence


def test_ppr_spreads_from_terms_to_passages():
    # Term t links passages a and b; b cites c; d is unrelated but seeded weakly.
    edges = [("t", "a", 1.0), ("t", "b", 1.0), ("b", "c", 1.0), ("d", "e", 1.0)]
    scores = personalized_pagerank(edges, {"t": 1.0, "d": 0.05})
    assert scores["a"] > scores["c"] > 0
    assert scores["b"] > scores["a"]          # b is reached from t and passes mass on to c
    assert scores["e"] < scores["a"]
    assert sum(scores.values()) == pytest.approx(1.0)
    assert personalized_pagerank(edges, {}) == {}
