import pytest
import math

from services.judge import core

pytestmark = pytest.mark.unit


def test_hit_recall_mrr_ndcg_on_known_ranking():
    ranked = ["x", "g1", "y", "g2"]
    gold = {"g1", "g2"}
    assert core.hit_at(ranked, gold, 1) == 0.0
    assert core.hit_at(ranked, gold, 2) == 1.0
    assert core.recall_at(ranked, gold, 2) == 0.5
    assert core.mrr_at(ranked, gold, 10) == 0.5
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3)
    assert math.isclose(core.ndcg_at(ranked, gold, 10), dcg / ideal)


def test_mrr_zero_beyond_cutoff():
    assert core.mrr_at(["a"] * 0 + [str(i) for i in range(20)], {"15"}, 10) == 0.0


def test_dedupe_counts_distinct_ids():
    assert core.dedupe(["a", "a", "b", "a", "c"]) == ["a", "b", "c"]


def test_citation_validity_and_f1():
    answer = "依法应当支付二倍工资[1]，并补订合同[3]。另见[9]。"
    assert math.isclose(core.citation_validity(answer, 3), 2 / 3)
    assert core.citation_validity("没有引用", 3) is None
    # cited ids: [1] -> d1, [3] -> d3 ([9] has no source); gold {d1, d2}
    f1 = core.citation_f1(answer, ["d1", "d2", "d3"], {"d1", "d2"})
    assert math.isclose(f1, 0.5)


def test_json_contamination():
    assert core.json_contamination('{"answer": 1}') == 1.0
    assert core.json_contamination("```json\n{}\n```") == 1.0
    assert core.json_contamination("正常的回答。") == 0.0
