"""The judge's metric set on small inputs with known values: each rule
metric, the three-round median, the merge policies, groups and overall."""
from __future__ import annotations

import math

import pytest

import domains

from services.judge import scoring
from services.judge import text_rules as tr
from services.judge.scoring import Group, JudgeInputs, Method

pytestmark = pytest.mark.unit

CONTEXTS = [
    "实用新型，是指对产品的形状、构造或者其结合所提出的适于实用的新的技术方案。",
    "发明，是指对产品、方法或者其改进所提出的新的技术方案。",
]
QUESTION = "什么是实用新型？"
ANSWER = "实用新型是指对产品的形状、构造提出的新的技术方案[1]。"


def by_name(**kwargs) -> dict[str, scoring.Score]:
    return scoring.judge(JudgeInputs(question=QUESTION, **kwargs)).by_name()


def test_ranked_metrics_on_a_known_ranking():
    s = by_name(ranked_ids=["x", "g1", "y", "g2"], gold_ids=["g1", "g2"], k=3)
    assert s["hit@3"].value == 1.0
    assert s["recall@3"].value == 0.5
    assert s["mrr@3"].value == 0.5
    assert math.isclose(s["ndcg@3"].value, (1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    # no context ids: context metrics use the top k of the ranking
    assert math.isclose(s["context_precision"].value, 1 / 3)
    assert s["context_recall"].value == 0.5
    assert all(s[n].method is Method.RULE for n in ("hit@3", "recall@3", "mrr@3", "ndcg@3"))


def test_ranked_metrics_without_gold_are_not_computed_never_zero():
    s = by_name(ranked_ids=["a", "b"])
    for name in ("hit@10", "recall@10", "mrr@10", "ndcg@10", "context_precision", "context_recall"):
        assert s[name].method is Method.NOT_COMPUTED and s[name].value is None
        assert "gold" in s[name].detail


def test_context_metrics_use_context_ids():
    s = by_name(ranked_ids=["d1", "d2", "d3"], contexts=["甲", "乙", "丙"], context_ids=["d1", "d1", "d3"], gold_ids=["d1", "d2"])
    assert s["context_recall"].value == 0.5          # d1 of {d1, d2}
    assert s["context_precision"].value == 0.5       # distinct contexts d1, d3: one gold
    assert math.isclose(s["cross_doc_coverage"].value, 2 / 3)


def test_citation_f1_of_a_known_answer():
    answer = "应当支付二倍工资[1]，并补订合同[3]。"
    s = by_name(answer=answer, contexts=["a", "b", "c"], context_ids=["d1", "d2", "d3"], gold_ids=["d1", "d2"])
    # cited {d1, d3}, gold {d1, d2}: precision 1/2, recall 1/2
    assert math.isclose(s["citation_f1"].value, 0.5)
    assert by_name(answer="没有引用。", contexts=["a"], context_ids=["d1"], gold_ids=["d1"])["citation_f1"].method is Method.NOT_COMPUTED


def test_text_overlap_rules_on_known_strings():
    # bigrams of "abcd" = ab bc cd; of "abce" = ab bc ce -> F1 = 2/3
    assert math.isclose(tr.overlap_f1("abcd", "abce"), 2 / 3)
    # correctness = character ROUGE-L F1 (LCS "abc": P = R = 3/4) when
    # neither text cites an article or states a number
    assert tr.correctness("abcd", "abce") == pytest.approx(3 / 4)
    assert tr.correctness("", "abce") is None
    assert tr.coverage(["形状", "方法"], "产品的形状") == 0.5
    # reference keywords (jieba search mode, stop words out): 发明 专利 利权
    # 专利权 期限 二十 十年 二十年; the answer holds 专利 期限 二十 十年 二十年.
    assert tr.completeness("专利 期限 二十年", "发明专利权的期限为二十年") == pytest.approx(5 / 8)


def test_faithfulness_hallucination_and_grounding():
    supported = "实用新型是对产品的形状、构造提出的新技术方案[1]。"
    invented = "保护期限为五十年且可无限续展。"
    assert tr.faithfulness(supported + invented, CONTEXTS) == 0.5
    assert tr.hallucination(supported, CONTEXTS) > tr.hallucination(supported + invented, CONTEXTS)
    assert tr.hallucination(CONTEXTS[0], CONTEXTS) == 1.0
    assert tr.source_grounded(supported + invented, 2) == 0.5
    assert tr.source_grounded("法律另有规定[5]。", 2) == 0.0  # [5] points at no context
    # a mark after the sentence end belongs to the sentence before it
    assert tr.source_grounded("甲方应当支付。[1]乙方不必支付。", 2) == 0.5
    # the extractive label is a note, not a sentence to ground
    assert tr.source_grounded("（抽取式答案）\n甲方应当支付工资。 [1]\n乙方应当补订合同。 [2]", 2) == 1.0


def test_factual_consistency_counts_numbers():
    assert tr.factual_consistency("期限为二十年，自申请日起算，费用100元。", "期限为二十年，费用200元。", []) == 0.5
    assert tr.factual_consistency("没有数字。", "二十年", []) is None
    assert tr.numbers("第1.5条和三十日") == ["1.5", "三十"]


def test_relevancy_entities_diversity():
    # question keywords: 实用 新型 实用新型 定义; the answer lacks 定义.
    assert tr.answer_relevancy("实用新型的定义", "实用新型是一种技术方案") == pytest.approx(3 / 4)
    assert tr.context_relevancy(QUESTION, ["实用新型", "无关的内容"]) == pytest.approx(0.5)
    assert tr.diversity(["abc", "abc"]) == 0.0
    assert tr.diversity(["abc", "xyz"]) == 1.0
    assert tr.diversity(["abc"]) is None
    assert tr.entity_utilisation(QUESTION, "与此无关。", CONTEXTS) == 0.0
    assert tr.entity_utilisation(QUESTION, ANSWER, CONTEXTS) == 1.0


def test_conciseness_readability_json():
    assert tr.conciseness("短回答。") == 1.0
    assert tr.conciseness("字" * 800) == pytest.approx(400 / 800)
    assert tr.conciseness("字" * 40, reference_answer="字" * 10) == pytest.approx(20 / 40)
    assert tr.readability("短句。") == 1.0
    assert tr.readability("字" * 159 + "。") == pytest.approx(80 / 160)
    assert tr.readability("```json\n{}\n```") < 1.0
    s = by_name(answer='{"answer": "x"}')
    assert s["json_contamination"].value == 0.0   # 1 = clean; this answer is JSON
    assert by_name(answer="正常回答。")["json_contamination"].value == 1.0


def test_multi_hop_needs_two_gold():
    s = by_name(ranked_ids=["g1", "x"], gold_ids=["g1", "g2"])
    assert s["multi_hop_accuracy"].method is Method.RULE and s["multi_hop_accuracy"].value == 0.5
    assert by_name(ranked_ids=["g1"], gold_ids=["g1"])["multi_hop_accuracy"].method is Method.NOT_COMPUTED


def test_cost_group_normalises_latency_and_tokens():
    s = by_name(answer="回答。", contexts=["资料"], timings_ms={"expand": 600.0, "retrieve.pg": 400.0, "retrieve.graph": 2000.0, "total": 1500.0}, total_tokens=8000)
    assert s["latency_norm.expand"].value == 0.5        # 300 ms budget / 600 ms
    assert s["latency_norm.retrieve"].value == 0.5      # slowest retriever 2000 ms vs 1000 ms
    assert s["pg_query_norm"].value == 1.0
    assert s["neo4j_query_norm"].value == 0.4           # 800 / 2000
    assert s["end_to_end_norm"].value == 1.0
    assert s["token_efficiency"].value == 0.5           # 4000 / 8000
    assert s["latency_norm.fuse"].method is Method.NOT_COMPUTED
    assert all(v.group is Group.COST for k, v in s.items() if "norm" in k)


def test_without_llm_llm_only_metrics_are_not_computed():
    result = scoring.judge(JudgeInputs(question=QUESTION, answer=ANSWER, contexts=CONTEXTS))
    s = result.by_name()
    for name in ("cot_quality", "reasoning_depth"):
        assert s[name].method is Method.NOT_COMPUTED and s[name].value is None
        assert "no" in s[name].detail and "LLM" in s[name].detail
    assert len(result.scores) == 31  # 12 A + 9 B + 3 C + 7 D, plus overall separately
    assert {g.group: g.total for g in result.groups} == {Group.RETRIEVAL: 12, Group.ANSWER: 9, Group.REASONING: 3, Group.COST: 7}


def test_rounds_are_collected_per_metric_and_failed_rounds_reported():
    results = [{"cot_quality": 0.2, "faithfulness": 0.9}, {"cot_quality": 0.8}, {"cot_quality": 0.5, "faithfulness": 0.1}]
    per_metric, errors = scoring.collect_rounds(results, ["cot_quality", "faithfulness"])
    assert per_metric == {"cot_quality": [0.2, 0.8, 0.5], "faithfulness": [0.9, 0.1]} and not errors
    per_metric, errors = scoring.collect_rounds([{"cot_quality": 1.7}, TimeoutError("slow"), {"cot_quality": True}], ["cot_quality"])
    assert per_metric == {"cot_quality": [1.0]}  # 1.7 clipped to 1; a bool is not a score
    assert errors == ["TimeoutError: slow"]


def test_failed_round_leaves_the_median_of_the_others():
    inputs = JudgeInputs(question=QUESTION, answer=ANSWER, contexts=CONTEXTS)
    names = scoring.llm_metric_names(inputs)
    result = scoring.judge(inputs, [{n: 1.0 for n in names}, TimeoutError("slow"), {n: 0.4 for n in names}]).by_name()
    assert result["cot_quality"].method is Method.LLM
    assert result["cot_quality"].llm_rounds == [1.0, 0.4]
    assert result["cot_quality"].value == pytest.approx(0.7)  # median of two rounds
    assert result["reasoning_depth"].detail == "median of 2 LLM rounds"


def test_median_of_three_rounds_is_the_middle_value():
    inputs = JudgeInputs(question=QUESTION, answer=ANSWER, contexts=CONTEXTS)
    names = scoring.llm_metric_names(inputs)
    s = scoring.judge(inputs, [{n: v for n in names} for v in (0.9, 0.1, 0.6)]).by_name()
    assert s["reasoning_depth"].value == 0.6 and s["reasoning_depth"].llm_rounds == [0.9, 0.1, 0.6]


def test_llm_metrics_need_an_answer_except_context_relevancy():
    assert scoring.llm_metric_names(JudgeInputs(question=QUESTION)) == ["context_relevancy"]
    assert "cot_quality" in scoring.llm_metric_names(JudgeInputs(question=QUESTION, answer=ANSWER))


def test_merge_policies():
    assert scoring.merge(0.4, 0.8, "max") == (0.8, Method.MERGED)
    assert scoring.merge(0.4, 0.8, "mean") == (pytest.approx(0.6), Method.MERGED)
    assert scoring.merge(0.4, None) == (0.4, Method.RULE)
    assert scoring.merge(None, 0.3) == (0.3, Method.LLM)
    assert scoring.merge(None, None) == (None, Method.NOT_COMPUTED)
    with pytest.raises(ValueError):
        scoring.merge(0.1, 0.2, "min")
    # One of the answer's two sentences is in the contexts: faithfulness rule 0.5.
    inputs = JudgeInputs(question=QUESTION, answer="实用新型是对产品的形状、构造提出的新技术方案[1]。保护期限为五十年且可无限续展。",
                         contexts=CONTEXTS)
    zero = [{n: 0.0 for n in scoring.llm_metric_names(inputs)}]
    for policy, expected in (("max", 0.5), ("mean", 0.25)):
        merged = scoring.judge(inputs, zero, policy=policy).by_name()["faithfulness"]
        assert merged.method is Method.MERGED and merged.value == pytest.approx(expected)
        assert merged.rule_value == pytest.approx(0.5) and merged.llm_value == 0.0


def test_overall_weights_and_renormalisation():
    groups = [
        scoring.GroupResult(Group.RETRIEVAL, 0.5, 0.40, 1, 12),
        scoring.GroupResult(Group.ANSWER, 1.0, 0.35, 1, 9),
        scoring.GroupResult(Group.REASONING, 0.2, 0.25, 1, 3),
        scoring.GroupResult(Group.COST, 0.0, 0.0, 1, 7),
    ]
    assert scoring.overall(groups).value == pytest.approx(0.40 * 0.5 + 0.35 * 1.0 + 0.25 * 0.2)
    groups[2] = scoring.GroupResult(Group.REASONING, None, 0.25, 0, 3)
    result = scoring.overall(groups)
    assert result.value == pytest.approx((0.40 * 0.5 + 0.35 * 1.0) / 0.75) and "C" in result.detail
    assert scoring.overall([scoring.GroupResult(Group.COST, 1.0, 0.0, 1, 7)]).method is Method.NOT_COMPUTED
    custom = scoring.judge(JudgeInputs(question=QUESTION, ranked_ids=["g"], gold_ids=["g"]),
                           weights={Group.RETRIEVAL: 1.0, Group.ANSWER: 0, Group.REASONING: 0, Group.COST: 0})
    assert custom.overall.value == pytest.approx(custom.groups[0].value)


REFERENCE = "根据《专利法》第四十二条，发明专利权的期限为二十年，实用新型专利权的期限为十年。"
LAW = domains.citation_rules(["law_zh"])


def test_correctness_against_a_reference_rewards_the_right_article_and_numbers():
    right = "依照《中华人民共和国专利法》第四十二条，发明专利权的期限为20年，实用新型为十年[1]。"
    parts = tr.reference_parts(right, REFERENCE, rules=LAW)
    assert parts["articles"] == 1.0 and parts["numbers"] == 1.0  # 20 = 二十; article 42 left out of numbers
    assert tr.correctness(right, REFERENCE, rules=LAW) > 0.8


def test_correctness_against_a_reference_fails_a_wrong_article_and_wrong_number():
    wrong = "依照《专利法》第四十四条，专利权的期限为五十年[1]。"
    parts = tr.reference_parts(wrong, REFERENCE, rules=LAW)
    assert parts["articles"] == 0.0 and parts["numbers"] == 0.0
    assert tr.correctness(wrong, REFERENCE, rules=LAW) < 0.3
    # the article it cites through [1] counts: the label names article 42
    assert tr.article_agreement("发明专利权的期限为二十年[1]。", REFERENCE, ["中华人民共和国专利法 第四十二条"], LAW) == 1.0


def test_article_references_read_with_and_without_law_names():
    assert tr.articles("法律依据:《中华人民共和国票据法》第八十一条……第八十二条", LAW) == {("票据法", 81), ("票据法", 82)}
    assert tr.articles("法条:刑法第266条", LAW) == {("刑法", 266)}
    assert tr.article_agreement("盗窃公私财物[1]", "法条:刑法第266条", ["中华人民共和国刑法 第二百六十六条"], LAW) == 1.0


def test_without_a_packs_citation_rules_articles_are_not_read_and_their_numbers_count():
    """The generic pack has no citation rules: a "第N条" is a number like any
    other, and article agreement is not computed."""
    assert domains.citation_rules(["generic"]) is None
    assert tr.articles("刑法第266条") == set()
    assert tr.article_agreement("依照刑法第266条[1]", "法条:刑法第266条") is None
    assert tr.reference_parts("第三条规定期限为十年", "第三条规定期限为十年")["numbers"] == 1.0
    assert tr.number_agreement("第三条规定期限为十年", "期限为十年") < 1.0
    assert tr.number_agreement("第三条规定期限为十年", "期限为十年", LAW) == 1.0


def test_judge_feeds_the_reference_and_cited_labels_to_correctness():
    s = by_name(answer="发明专利权的期限为二十年[1]。", contexts=["发明专利权的期限为二十年"], reference_answer=REFERENCE,
                context_labels=["中华人民共和国专利法 第四十四条"], citation_rules=LAW)
    assert s["correctness"].method is Method.RULE and s["completeness"].method is Method.RULE
    right = by_name(answer="发明专利权的期限为二十年[1]。", contexts=["发明专利权的期限为二十年"], reference_answer=REFERENCE,
                    context_labels=["中华人民共和国专利法 第四十二条"], citation_rules=LAW)
    assert right["correctness"].value > s["correctness"].value


def test_the_extractive_label_is_not_a_claim():
    answer = "（抽取式答案：未使用大模型，以下句子摘自检索到的资料）\n实用新型是对产品的形状、构造提出的新技术方案 [1]"
    body = answer.split("\n", 1)[1]
    assert tr.faithfulness(answer, CONTEXTS) == tr.faithfulness(body, CONTEXTS) == 1.0
    assert tr.hallucination(answer, CONTEXTS) == tr.hallucination(body, CONTEXTS)


def test_keywords_and_texts_in_either_form_of_chinese_match():
    assert tr.coverage(["婚假", "工资"], "員工結婚者給予婚假8日，工資照給") == 1.0
    assert tr.overlap_f1("員工結婚給予婚假", "员工结婚给予婚假") == 1.0
