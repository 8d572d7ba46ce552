"""Entity ranking rules: gate, weights, bonus guard, one-character and
exact-hit protection."""
from __future__ import annotations

import pytest

from services.fuser.entity_rank import EntityItem, Evidence, RankConfig, features, passes_gate, protect_exact, rank

pytestmark = pytest.mark.unit


def item(name, channel="graph.fulltext", score=1.0, matched="", relation="direct", **kw):
    return EntityItem(name, evidence=[Evidence(channel, score, matched or name, relation)], **kw)


def test_one_character_query_returns_only_the_exact_entity():
    cands = [item("马铃薯"), item("马铃薯种植面积"), item("马", "graph.exact"), item("马铃薯产量")]
    ranked, _ = rank("马", cands)
    assert [r.name for r in ranked] == ["马"]
    ranked, _ = rank("马", [item("马铃薯"), item("马铃薯产量")])
    assert ranked == []


def test_longer_query_does_not_pull_in_one_character_entity():
    cands = [item("马", "graph.expand", 0.85, relation="parent"), item("马铃薯", "graph.exact")]
    ranked, _ = rank("马铃薯", cands)
    assert [r.name for r in ranked] == ["马铃薯"]


def test_gate_rejects_single_shared_character():
    cfg = RankConfig()
    assert not passes_gate(item("马匹"), "马铃薯", cfg)                 # shares only 马
    assert passes_gate(item("马铃薯产量"), "马铃薯", cfg)               # phrase of >= 2 characters
    assert passes_gate(item("铃薯"), "马铃薯", cfg)                     # shared bigram
    assert passes_gate(item("茄子", "pg.entity_vector", cfg.vector_gate), "马铃薯", cfg)
    assert not passes_gate(item("茄子", "pg.entity_vector", cfg.vector_gate - 0.01), "马铃薯", cfg)
    ranked, gated = rank("马铃薯", [item("马匹"), item("马铃薯", "graph.exact")])
    assert [r.name for r in ranked] == ["马铃薯"] and gated == 1


def test_relation_is_that_of_the_strongest_evidence():
    parent = item("薯类", "graph.expand", 0.85)
    parent.evidence[0].relation = "parent"
    parent.evidence.append(Evidence("pg.entity_keyword", 0.17, "薯", "direct"))  # one shared character
    ranked, _ = rank("马铃薯", [item("马铃薯", "graph.exact"), parent])
    assert [(r.name, r.relation) for r in ranked] == [("马铃薯", "direct"), ("薯类", "parent")]


def test_exact_hit_stays_first_after_rerank():
    cands = [item("马铃薯", "graph.exact"), item("马铃薯种植面积"), item("马铃薯产量")]
    ranked, _ = rank("马铃薯", cands, rerank_scores={"马铃薯种植面积": 1.0, "马铃薯产量": 0.1, "马铃薯": 0.0})
    assert ranked[0].name == "马铃薯" and ranked[0].breakdown.get("exact_protected") == 1.0
    assert [r.name for r in ranked[1:]] == ["马铃薯种植面积", "马铃薯产量"]


def test_protect_exact_uses_alias_too():
    ranked = [item("马铃薯产量"), item("马铃薯", aliases=["土豆"])]
    assert protect_exact(ranked, "土豆")[0].name == "马铃薯"


def test_high_coverage_bonus_needs_length():
    # "面积" is fully covered by the query but short: no high bonus
    ranked, _ = rank("马铃薯种植面积", [item("面积"), item("马铃薯种植面积")])
    by = {r.name: r for r in ranked}
    assert by["马铃薯种植面积"].breakdown["bonus"] == 0.10
    assert by["面积"].breakdown["bonus"] == 0.0 and by["面积"].breakdown["penalty"] < 0  # broad entity
    assert ranked[0].name == "马铃薯种植面积"


def test_attribute_coverage_orders_and_breakdown_sums():
    cands = [
        item("普通感冒", "graph.attribute", 1 / 3, "发热", "attribute"),
        item("流行性感冒", "graph.attribute", 1.0, "发热、头痛、肌肉酸痛", "attribute"),
    ]
    ranked, _ = rank("症状：发热、头痛、肌肉酸痛", cands)
    assert ranked[0].name == "流行性感冒" and ranked[0].relation == "attribute"
    assert abs(sum(ranked[0].breakdown.values()) - ranked[0].score) < 1e-3


def test_weights_with_and_without_embeddings():
    cands = [item("马铃薯产量", "pg.entity_vector", 0.96)]
    with_e, _ = rank("马铃薯产", cands, with_embeddings=True)
    without, _ = rank("马铃薯产", [item("马铃薯产量", "pg.entity_vector", 0.96)], with_embeddings=False)
    assert "vector" in with_e[0].breakdown and "vector" not in without[0].breakdown
    assert with_e[0].breakdown["vector"] == round(0.25 * (0.96 - 0.90) / (1 - 0.90), 4)  # stretched above the gate


def test_attribute_route_prefers_the_answer_over_a_listed_value():
    cands = [
        item("气管食管瘘", "graph.fulltext", 1.0),  # one of the listed values, found by name
        item("18—三体综合征", "graph.attribute", 0.8, "前额窄小、枕部后突、气管食管瘘、眼睑下垂", "attribute"),
    ]
    query = "症状：前额窄小、外生殖器发育不良等、枕部后突、气管食管瘘、眼睑下垂"
    values = ["前额窄小", "外生殖器发育不良等", "枕部后突", "气管食管瘘", "眼睑下垂"]
    ranked, _ = rank(query, [c for c in cands], route="attribute", attribute_values=values)
    assert ranked[0].name == "18—三体综合征"
    assert ranked[0].breakdown["route"] > 0 and ranked[1].breakdown["penalty"] < 0


def test_literal_channel_score_counts_as_fuzzy_evidence():
    plain = item("荔枝核", "graph.fulltext", 0.3)
    with_keyword = item("荔枝核", "pg.entity_keyword", 1.0)
    assert features(plain, "大荔核", "大荔核", set())["fuzzy"] == pytest.approx(2 / 3)  # rapidfuzz ratio
    assert features(with_keyword, "大荔核", "大荔核", set())["fuzzy"] == 1.0


def test_a_close_vector_does_not_make_an_expanded_parent_direct():
    """e5 scores 薯类 0.93 against 马铃薯: the parent edge still names the relation."""
    parent = EntityItem("薯类", "蔬菜", evidence=[
        Evidence("pg.entity_vector", 0.93, "薯类", "direct"),
        Evidence("graph.expand", 0.6, "parent:马铃薯", "parent")])
    [ranked], _ = rank("马铃薯", [parent], with_embeddings=True)
    assert ranked.relation == "parent"


def test_the_vector_feature_is_the_cosine_above_the_floor_stretched_to_one():
    close = EntityItem("马铃薯", evidence=[Evidence("pg.entity_vector", 0.95, "马铃薯", "direct")])
    far = EntityItem("普通感冒", evidence=[Evidence("pg.entity_vector", 0.85, "普通感冒", "direct")])
    assert features(close, "洋芋", "洋芋", set(), vector_floor=0.9)["vector"] == pytest.approx(0.5)
    assert features(far, "洋芋", "洋芋", set(), vector_floor=0.9)["vector"] == 0.0
    assert features(close, "洋芋", "洋芋", set())["vector"] == pytest.approx(0.95)
