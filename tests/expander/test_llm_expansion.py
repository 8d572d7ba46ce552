import pytest
import numpy as np

from services.expander import llm_expansion as le

pytestmark = pytest.mark.unit


def test_sub_queries_are_parsed_from_numbered_lines():
    raw = "```\n1. 未签劳动合同的二倍工资如何计算？\n2、二倍工资的起算时间\n- 劳动合同法第八十二条\n短\n2. 二倍工资的起算时间\n```"
    assert le.parse_sub_queries(raw, "问题", 5) == ["未签劳动合同的二倍工资如何计算？", "二倍工资的起算时间", "劳动合同法第八十二条"]
    assert le.parse_sub_queries(raw, "问题", 1) == ["未签劳动合同的二倍工资如何计算？"]


def test_sub_queries_drop_the_query_itself_and_citation_marks():
    raw = "用人单位应当支付多少工资？\n二倍工资的计算[2]。\n用人单位应当支付多少工资?"
    assert le.parse_sub_queries(raw, "用人单位应当支付多少工资？", 3) == ["二倍工资的计算。"]


def test_single_rewrite_strips_labels_quotes_and_fences():
    assert le.parse_single("查询：“劳动合同 书面 二倍工资”") == "劳动合同 书面 二倍工资"
    assert le.parse_single("```json\n用人单位应当支付二倍工资。\n依法订立。\n```") == "用人单位应当支付二倍工资。 依法订立。"


def test_rule_fallbacks_without_llm():
    assert le.rule_expanded_query("什么是实用新型？", ["实用新型"]) == "实用新型"
    assert le.rule_sub_queries("q", ["劳动合同", "工资", "二倍"], 2) == ["劳动合同 工资", "劳动合同 二倍"]
    assert le.rule_sub_queries("q", ["工资"], 3) == ["工资"]


def test_cosine_scores():
    q = np.array([1.0, 0.0])
    scores = le.cosine_scores(q, np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]]))
    assert scores == [1.0, 0.0, -1.0]


def test_prompts_carry_the_query_and_context():
    msgs = le.build_messages(le.SUB_QUERIES, "问？", "已知内容", 3)
    assert "问？" in msgs[1]["content"] and "已知内容" in msgs[1]["content"] and "3" in msgs[1]["content"]
    assert "问？" in le.build_messages(le.HYDE, "问？")[1]["content"]


async def test_rewrite_without_llm_falls_back_and_says_why():
    result = await le.rewrite(None, le.HYDE, "问题", "", 3, ["问题"], 1.0)
    assert result.rewrites == [] and not result.llm_used and result.fallback_reason == "no LLM configured"
    result = await le.rewrite(None, le.EXPANDED_QUERY, "什么是实用新型？", "", 3, ["实用新型"], 1.0)
    assert result.rewrites == [("实用新型", 0.0, "rule")]


def test_rewrite_prompts_are_the_packs_and_general_without_one():
    """A law collection's rewrite asks for legal terms and a statute-worded
    HyDE passage; any other collection's asks for neither."""
    import domains
    from services.expander.llm_expansion import EXPANDED_QUERY, HYDE, build_messages

    law = domains.rewrite_prompts(["generic", "law_zh"])
    assert "法律术语" in build_messages(EXPANDED_QUERY, "没签合同怎么办", prompts=law)[1]["content"]
    assert "法律条文" in build_messages(HYDE, "没签合同怎么办", prompts=law)[1]["content"]
    general = [m["content"] for kind in (EXPANDED_QUERY, HYDE) for m in build_messages(kind, "年假怎么算")]
    assert not any("法律" in text for text in general) and all("年假怎么算" in text for text in general[1::2])
    assert domains.rewrite_prompts(["generic"]) is None
