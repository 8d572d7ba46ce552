"""The document graph's in-memory lookups (articles, terms, offences) and the
PPR they feed, on real articles of /work/shared/data/law-zh (ids are that
corpus's ids)."""
from __future__ import annotations

import numpy as np
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
# 刑法 第二百七十七条 (5017): 妨害公务罪, whose name shares no bigram with its act.
OBSTRUCTION = "以暴力、威胁方法阻碍国家机关工作人员依法执行职务的，处三年以下有期徒刑、拘役、管制或者罚金。"


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
                (("5005", FRAUD), ("4966", INJURY), ("5047", CORPSE), ("5017", OBSTRUCTION))]
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
    assert offence_names("李某因涉嫌跨境犯罪被日本方面追捕") == []   # 犯罪, "crime", names no offence
    assert offence_names("对该盲人犯罪可以从轻处罚吗") == []
    assert offence_names("他打了人，会以什么罪被起诉？") == []            # asks for the offence
    assert offence_names("朋友借钱不还，能告他涉嫌哪种罪吗") == []
    assert offence_names("罪名：盗窃、") == ["盗窃"]
    assert offence_names("罪名：诈骗，被告人当庭认罪") == ["诈骗"]         # the value ends at its comma
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


def test_offence_probes_and_vectors_match_a_name_by_meaning():
    idx = index()
    case = "被告人以暴力阻碍民警依法执行职务。\n罪名:妨害公务。"
    assert idx.offence_hits(case) == []                      # no shared bigram: nothing by characters
    assert idx.dense_documents == ["5005", "4966", "5047", "5017"]
    assert idx.probes("graph.offence", case) == []           # no vectors attached yet
    # Unit vectors standing in for the embedder's: the name is closest to 5017.
    idx.attach_vectors(np.eye(4, dtype=np.float32))
    assert idx.vectors_attached
    assert idx.probes("graph.offence", case) == ["妨害公务罪"]
    assert idx.probes("graph.term", case) == []
    name = np.array([[0.1, 0.2, 0.0, 0.97]], dtype=np.float32)
    hits = idx.hits("graph.offence", case, [], 10, probe_vectors=name)
    assert [h.doc_id for h in hits] == ["5017"]              # the closest passes; the others score under 0.4
    assert hits[0].score == round((0.2 / 1.5 + 1.0) / 2, 4) and hits[0].evidence == "offence:妨害公务"


def test_offence_vectors_reorder_but_keep_a_character_match():
    idx = index()
    idx.attach_vectors(np.eye(4, dtype=np.float32))
    case = "被告人骗取货款。\n罪名:诈骗。"
    by_chars = idx.offence_hits(case)
    assert by_chars[0].doc_id == "5005"
    # Vectors that agree with the characters raise its score to at least the mean of both.
    hits = idx.offence_hits(case, probe_vectors=np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32))
    assert hits[0].doc_id == "5005" and hits[0].score >= by_chars[0].score / 2 + 0.5 - 1e-6
    # Probe vectors that do not line up with the names are ignored (characters only).
    assert idx.offence_hits(case, probe_vectors=np.ones((2, 4), dtype=np.float32)) == by_chars
    # Nor are vectors of another model's dimension (the expander restarted with another embedder).
    assert idx.offence_hits(case, probe_vectors=np.ones((1, 8), dtype=np.float32)) == by_chars
    with pytest.raises(ValueError):
        idx.attach_vectors(np.eye(3, dtype=np.float32))


def test_an_article_without_a_vector_neither_matches_by_meaning_nor_sets_the_scale():
    case = "被告人以暴力阻碍民警依法执行职务。\n罪名:妨害公务。"
    name = np.array([[0.1, 0.2, 0.0, 0.97]], dtype=np.float32)
    clean = index()
    clean.attach_vectors(np.eye(4, dtype=np.float32) * 0.3 + 0.7)   # cosines all near one another, well above 0
    holed = index()
    vectors = np.eye(4, dtype=np.float32) * 0.3 + 0.7
    vectors[0] = 0.0                                                   # 5005's text was not found
    holed.attach_vectors(vectors)
    nan = index()
    vectors = np.eye(4, dtype=np.float32) * 0.3 + 0.7
    vectors[1] = np.nan
    nan.attach_vectors(vectors)
    by_clean = {h.doc_id: h.score for h in clean.offence_hits(case, probe_vectors=name)}
    by_holed = {h.doc_id: h.score for h in holed.offence_hits(case, probe_vectors=name)}
    assert list(by_clean) == ["5017"] and list(by_holed) == ["5017"]  # a zero row does not lift the others
    assert [h.doc_id for h in nan.offence_hits(case, probe_vectors=name)] == ["5017"]


def test_a_probe_that_is_not_a_vector_is_matched_by_characters():
    idx = index()
    idx.attach_vectors(np.eye(4, dtype=np.float32))
    case = "被告人骗取货款。\n罪名:诈骗。"
    by_chars = idx.offence_hits(case)
    assert idx.offence_hits(case, probe_vectors=np.zeros((1, 4), dtype=np.float32)) == by_chars
    assert idx.offence_hits(case, probe_vectors=np.full((1, 4), np.nan, dtype=np.float32)) == by_chars
    idx.attach_vectors(None)
    assert not idx.vectors_attached and idx.probes("graph.offence", case) == []
