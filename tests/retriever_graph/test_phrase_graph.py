"""The general phrase graph's pure parts: key phrases of a chunk, the query's
phrases and HippoRAG 2's restart vector."""
from __future__ import annotations

import pytest

from services.retriever_graph.phrase_graph import chunk_phrases, phrase_reset, query_phrases

pytestmark = pytest.mark.unit

CHUNK = "MetaSearch 的信息增长率按每轮新增文档数除以已有文档数计算，低于阈值时停止迭代检索。"


def test_chunk_phrases_are_nouns_and_names_best_first_with_the_best_at_one():
    phrases = chunk_phrases(CHUNK)
    words = [p for p, _ in phrases]
    assert "metasearch" in words            # a Latin-script name, lower-cased
    assert "文档" in words or "文档数" in words
    assert not {"按", "的", "除以", "计算", "停止"} & set(words)  # function words and verbs are not phrases
    weights = [w for _, w in phrases]
    assert weights[0] == 1.0 and weights == sorted(weights, reverse=True) and all(0 < w <= 1 for w in weights)


def test_chunk_phrases_honours_the_limit_and_drops_numbers_and_single_characters():
    phrases = chunk_phrases("第3轮 2024 年 检索 向量 索引 文档 查询 排序 融合 召回 重排 阈值", limit=3)
    assert len(phrases) == 3
    assert all(len(p) >= 2 and not p.isdigit() for p, _ in phrases)
    assert chunk_phrases("的了吗", limit=5) == [] and chunk_phrases(CHUNK, limit=0) == []


def test_query_phrases_add_the_query_tokens_the_stored_vocabulary_holds():
    without = query_phrases("信息增长率怎么算？")
    with_vocab = query_phrases("信息增长率怎么算？", vocabulary={"增长率", "信息", "无关"})
    assert set(without) <= set(with_vocab)
    assert "增长率" in with_vocab and "无关" not in with_vocab
    assert len(with_vocab) == len(set(with_vocab))


def test_phrase_reset_weighs_phrases_by_inverse_passage_count_and_passages_by_normalised_score():
    reset = phrase_reset(["检索", "阈值", "未存"], {"检索": 4, "阈值": 1},
                         {"c1": 0.9, "c2": 0.5, "c3": 0.1}, passage_node_weight=0.05)
    assert reset["p:检索"] == pytest.approx(0.25) and reset["p:阈值"] == pytest.approx(1.0)
    assert "p:未存" not in reset                      # no stored chunk holds it
    assert reset["c:c1"] == pytest.approx(0.05) and reset["c:c2"] == pytest.approx(0.025)
    assert "c:c3" not in reset                        # the lowest score normalises to 0
    assert phrase_reset([], {}, {"a": 0.3, "b": 0.3}, 0.05) == {"c:a": 0.05, "c:b": 0.05}
