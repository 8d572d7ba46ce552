import pytest
from graphmesh.common.v1 import types_pb2
from services.gateway.answer import fallback_rules as fallback

pytestmark = pytest.mark.unit


def _cand(cid: str, **scores: float) -> types_pb2.Candidate:
    return types_pb2.Candidate(id=cid, channel_scores=[types_pb2.ChannelScore(channel=k.replace("_", "."), score=v) for k, v in scores.items()])


def test_order_is_the_reference_chain():
    assert fallback.ORDER == ("standard", "expanded_query", "hyde", "entity_names", "fast_path")


def test_evidence_is_the_best_vector_cosine_and_ignores_other_channels():
    results = [_cand("a", pg_keyword=7.0), _cand("b", pg_vector=0.41), _cand("c", pg_vector=0.52, pg_keyword=2.0)]
    assert fallback.evidence_score(results) == 0.52
    assert fallback.evidence_score([_cand("a", pg_keyword=3.0)]) == 0.0
    assert fallback.evidence_score([]) == 0.0


def test_judge_fails_empty_weak_and_degraded_retrievals_with_reasons():
    assert fallback.judge(0, 0.0, 0.3) == fallback.Verdict(False, "empty retrieval")
    weak = fallback.judge(5, 0.25, 0.3)
    assert not weak.accepted and weak.reason == "evidence 0.250 < 0.300"
    down = fallback.judge(5, 0.9, 0.3, degraded=["reranker", "retriever_pg"])
    assert not down.accepted and down.reason == "retriever_pg unavailable"
    assert fallback.judge(5, 0.9, 0.3, degraded=["reranker"]).accepted  # an optional service is no reason
    # nor the graph: what PostgreSQL found through the full pipeline is all the fast path would find, and more
    assert fallback.judge(5, 0.9, 0.3, degraded=["retriever_graph"]).accepted
    assert fallback.judge(1, 0.3, 0.3).accepted


def test_entity_names_query_adds_new_distinct_names_only():
    q = fallback.entity_names_query("劳动合同法 二倍工资", ["中华人民共和国劳动合同法", "", "劳动合同法", "第八十二条", "第八十二条"], max_names=5)
    assert q == "劳动合同法 二倍工资 中华人民共和国劳动合同法 第八十二条"
    assert fallback.entity_names_query("问题", []) == "问题"
    assert fallback.entity_names_query("问", [f"名{i}" for i in range(10)], max_names=2) == "问 名0 名1"
