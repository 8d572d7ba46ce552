"""The learned ranker (issue 23): candidate-list features, a tiny LambdaMART
model trained here that the ranker loads and follows, the training helpers
(labels, folds, ranks as the evaluation counts them), and the shipped law_zh
model's layout."""
from __future__ import annotations

import math

import pytest

from graphmesh.common.v1 import types_pb2
from services.cli import ltr_training
from services.reranker import ltr
from services.reranker.ltr import (
    BASE_FEATURES, MISSING_RANK, MISSING_SCORE, MISSING_STATUS, FeatureSpec, LtrCandidate, LtrRanker, LtrScorer,
    features, keyword_terms,
)
from services.reranker.scorer import ScorerUnavailable

pytestmark = pytest.mark.unit

SPEC = FeatureSpec(("pg.vector", "pg.keyword"))


def col(name: str, spec: FeatureSpec = SPEC) -> int:
    return spec.names.index(name)


def cand(i: int, title: str = "民法典", text: str = "", channels=None, fused: float = 1.0, status: str = "") -> LtrCandidate:
    return LtrCandidate(id=f"c{i}", document_id=f"d{i}", title=title, text=text, heading_path=(title, f"第{i}条"),
                        channels=channels or {}, fused_score=fused, status=status)


def test_feature_names_and_layout_round_trip():
    names = SPEC.names
    assert names[:len(BASE_FEATURES)] == list(BASE_FEATURES)
    assert names[len(BASE_FEATURES):] == ["score.pg.vector", "rel.pg.vector", "rank.pg.vector",
                                          "score.pg.keyword", "rel.pg.keyword", "rank.pg.keyword"]
    assert FeatureSpec.from_names(names) == SPEC
    with pytest.raises(ValueError):
        FeatureSpec.from_names(["fused_score", *names[1:]][::-1])
    with pytest.raises(ValueError):
        FeatureSpec.from_names([*BASE_FEATURES, "score.a", "rank.a", "rel.a"])


def test_channel_scores_ranks_and_sentinels():
    rows = features([
        cand(1, channels={"pg.vector": (0.9, 1), "pg.keyword": (40.0, 2)}, fused=2.0),
        cand(2, channels={"pg.vector": (0.45, 3), "graph.term": (1.0, 1)}, fused=1.0),
    ], spec=SPEC)
    a, b = rows
    assert len(a) == len(SPEC.names)
    assert a[col("score.pg.vector")] == 0.9 and a[col("rel.pg.vector")] == 1.0 and a[col("rank.pg.vector")] == 1
    assert b[col("rel.pg.vector")] == pytest.approx(0.5) and b[col("rank.pg.vector")] == 3
    assert b[col("score.pg.keyword")] == MISSING_SCORE and b[col("rel.pg.keyword")] == MISSING_SCORE
    assert b[col("rank.pg.keyword")] == MISSING_RANK
    # Channels outside the spec are not counted (graph.term), the others are.
    assert a[col("n_channels")] == 2 and b[col("n_channels")] == 1
    assert a[col("fused_rel")] == 1.0 and b[col("fused_rel")] == 0.5
    assert [r[col("fused_rank")] for r in rows] == [1, 2]  # list position when fused_rank is unset
    assert a[col("list_size")] == 2


def test_document_aggregates_count_the_same_title():
    rows = features([cand(1, "刑法", fused=3.0), cand(2, "民法典", fused=2.0), cand(3, "刑法", fused=1.0),
                     cand(4, "刑法", fused=0.5)], spec=SPEC)
    assert [r[col("doc_count")] for r in rows] == [3, 1, 3, 3]
    assert rows[0][col("doc_share")] == 0.75
    assert rows[2][col("doc_best_fused_rel")] == 1.0  # its law's best is the top candidate
    assert rows[1][col("doc_best_fused_rel")] == pytest.approx(2 / 3)
    assert [r[col("doc_best_rank")] for r in rows] == [1, 2, 1, 1]
    assert [r[col("doc_position")] for r in rows] == [0, 0, 1, 2]


def test_keyword_coverage_length_and_status():
    text = "农民专业合作社可以出资设立联合社"
    rows = features([cand(1, text=text, status="现行有效"), cand(2, text="无关", status="已修改"), cand(3, text="")],
                    keywords=["合作", "合作社", "出资", "规模", " "], spec=SPEC)
    # 合作 is inside 合作社 and dropped: terms are 合作社, 出资, 规模.
    assert keyword_terms(["合作", "合作社", "出资", "规模", " "]) == ["合作社", "出资", "规模"]
    a, b, c = rows
    assert a[col("kw_cover")] == pytest.approx(2 / 3) and a[col("kw_hits")] == 2
    assert a[col("kw_cover_chars")] == pytest.approx(5 / 7)
    assert a[col("query_keywords")] == 3
    assert b[col("kw_cover")] == 0.0
    assert a[col("text_chars")] == len(text) and a[col("log_text_chars")] == pytest.approx(math.log1p(len(text)))
    assert [r[col("status_in_force")] for r in rows] == [1.0, 0.0, MISSING_STATUS]
    assert features([], spec=SPEC) == []
    assert features([cand(1, text=text)], spec=SPEC)[0][col("kw_cover")] == 0.0  # no keywords: 0


def test_from_proto_and_from_record_agree():
    proto = types_pb2.Candidate(
        id="7#0", document_id="7", title="刑法", heading_path=["刑法", "第七条"], text="正文", fused_score=1.5,
        metadata={"status": "现行有效"},
        channel_scores=[types_pb2.ChannelScore(channel="pg.vector", score=0.8, rank=2),
                        types_pb2.ChannelScore(channel="pg.vector", score=0.1, rank=9)])
    record = {"id": "7#0", "document_id": "7", "title": "刑法", "heading_path": ["刑法", "第七条"], "text": "正文",
              "fused_score": 1.5, "metadata": {"status": "现行有效"}, "channels": [["pg.vector", 0.8, 2]]}
    assert LtrCandidate.from_proto(proto) == LtrCandidate.from_record(record)


def synthetic_questions(n: int = 40) -> list[dict]:
    """Lists whose gold is always the last in fused order but the only
    candidate covering the keywords: a model must learn to lift it."""
    out = []
    for q in range(n):
        cands = []
        for i in range(6):
            gold = i == 5
            cands.append({"id": f"{q}-{i}", "document_id": f"{q}-{i}", "title": f"法{i}", "heading_path": [f"法{i}"],
                          "text": "关键词甲乙" if gold else f"其他内容{i}", "metadata": {}, "fused_score": 6.0 - i,
                          "fused_rank": i + 1, "channels": [["pg.vector", 0.9 - 0.01 * i, i + 1]]})
        out.append({"id": str(q), "set": "toy", "gold": [f"{q}-5"], "keywords": ["关键词", "甲乙"], "candidates": cands})
    return out


TINY = {**ltr_training.PARAMS, "min_data_in_leaf": 1, "num_leaves": 4, "learning_rate": 0.3, "bagging_fraction": 1.0,
        "feature_fraction": 1.0}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    booster = ltr_training.train(synthetic_questions(), TINY, rounds=10)
    path = tmp_path_factory.mktemp("ltr") / "tiny.txt"
    booster.save_model(str(path))
    return path


def test_ranker_follows_the_trained_model(tiny_model):
    ranker = LtrRanker(tiny_model)
    assert ranker.name == "tiny" and ranker.spec == FeatureSpec()
    question = synthetic_questions(1)[0]
    cands = ltr_training.candidates_of(question)
    ranked = ranker.rerank(cands, question["keywords"])
    assert ranked[0][0].id == "0-5"  # last in fused order, first after LTR
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    assert ltr_training.first_gold(question) == 6
    booster = ltr_training.train(synthetic_questions(), TINY, rounds=10)
    assert ltr_training.first_gold(question, ltr_training.ltr_order(booster, question)) == 1
    assert ranker.score([]) == []


def test_scorer_scores_protos_in_unit_range(tiny_model):
    scorer = LtrScorer(tiny_model)
    question = synthetic_questions(1)[0]
    protos = [types_pb2.Candidate(id=r["id"], document_id=r["document_id"], title=r["title"], text=r["text"],
                                  heading_path=r["heading_path"], fused_score=r["fused_score"],
                                  channel_scores=[types_pb2.ChannelScore(channel=c, score=s, rank=k)
                                                  for c, s, k in r["channels"]])
              for r in question["candidates"]]
    scores = scorer.score_list(protos, question["keywords"])
    assert len(scores) == 6 and all(0.0 <= s <= 1.0 for s in scores)
    assert max(range(6), key=scores.__getitem__) == 5
    assert scorer.name == "ltr" and scorer.listwise and scorer.device == "cpu"


def test_missing_model_is_unavailable(tmp_path):
    with pytest.raises(FileNotFoundError):
        LtrRanker(tmp_path / "none.txt")
    with pytest.raises(ScorerUnavailable) as err:
        LtrScorer(tmp_path / "none.txt").load()
    assert err.value.reason == "no_model"


def test_training_helpers_labels_folds_and_split():
    q = {"id": "1", "set": "s", "gold": ["刑法", "9"], "candidates": [
        {"id": "a", "document_id": "8", "title": "民法"}, {"id": "b", "document_id": "9", "title": "x"},
        {"id": "c", "document_id": "10", "title": "刑法"}, {"id": "d", "document_id": "9", "title": "x"}]}
    assert ltr_training.labels(q) == [0, 1, 1, 1]
    assert ltr_training.ranking_keys(q["candidates"], {"刑法", "9"}) == ["8", "9", "刑法"]
    assert ltr_training.first_gold(q) == 2 and ltr_training.first_gold(q, [2, 0, 1, 3]) == 1
    questions = [{"id": str(i), "set": "s"} for i in range(200)]
    folds = ltr_training.folds_of(questions, 5, 23)
    assert set(folds) == set(range(5)) and folds == ltr_training.folds_of(list(reversed(questions)), 5, 23)[::-1]
    fit, held = ltr_training.holdout_split(questions)
    assert len(fit) + len(held) == 200 and 70 < len(held) < 130
    assert not {x["id"] for x in fit} & {x["id"] for x in held}
    with pytest.raises(ValueError):
        ltr_training.train([{**q, "gold": []}])


def test_shipped_law_model_loads():
    assert ltr.DEFAULT_MODEL_FILE.is_file(), "models/ltr/law_zh.txt is missing (see models/ltr/README.md)"
    ranker = LtrRanker(ltr.DEFAULT_MODEL_FILE)
    assert ranker.spec == FeatureSpec()
    assert len(ranker.score([cand(1, text="a"), cand(2, text="b")])) == 2
