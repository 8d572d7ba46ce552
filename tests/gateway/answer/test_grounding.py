import pytest
from services.gateway.answer import grounding as generation
from services.gateway.answer.grounding import build_messages, clean_answer

pytestmark = pytest.mark.unit

def test_clean_answer_removes_citations_without_source_and_fences():
    cleaned = clean_answer("```markdown\n应当支付二倍工资[1][4]。\n```", n_sources=2)
    assert cleaned.text == "应当支付二倍工资[1]。"
    assert cleaned.invalid_citations_removed == 1
    assert cleaned.fences_removed == 2


def test_prompt_carries_numbered_context_and_question():
    messages = build_messages("问题？", "[1] 法\n条文。")
    assert "[1] 法\n条文。" in messages[1]["content"] and "问题？" in messages[1]["content"]


def test_clean_answer_unwraps_a_json_answer_and_counts_it():
    cleaned = clean_answer('{"answer": "应当支付二倍工资[1][3]。"}', n_sources=1)
    assert cleaned.text == "应当支付二倍工资[1]。"
    assert cleaned.fences_removed == 1 and cleaned.invalid_citations_removed == 1


def test_packed_texts_reads_the_context_blocks_as_packed():
    from services.gateway.answer.grounding import packed_texts

    context = "[1] 专利法 第四十二条\n发明专利权的期限为二十年。[TRUNCATED]\n[2] 专利法 第四十四条\n专利权终止。"
    assert packed_texts(context, 2) == ["发明专利权的期限为二十年。", "专利权终止。"]
    assert packed_texts(context, 3) is None


def test_for_quoting_a_source_cut_after_a_semicolon_loses_its_dangling_clause():
    # a fresh user's answer quoted "金卡及以上会员可免费延迟至16:00；": the packer had cut "节假日期间不适用此项优惠。" off
    from services.gateway.answer.grounding import packed_texts

    cut = "[1] 入住须知 延迟退房\n延迟退房须在前台提前申请。金卡及以上会员可免费延迟至16:00；[TRUNCATED]\n[2] 押金\n押金每晚500元；"
    assert packed_texts(cut, 2, drop_cut_clause=True) == ["延迟退房须在前台提前申请。", "押金每晚500元；"]  # [2] was not cut
    assert packed_texts(cut, 2) == ["延迟退房须在前台提前申请。金卡及以上会员可免费延迟至16:00；", "押金每晚500元；"]
    alone = "[1] 须知\n金卡及以上会员可免费延迟至16:00；[TRUNCATED]"  # no full stop to go back to: kept
    assert packed_texts(alone, 1, drop_cut_clause=True) == ["金卡及以上会员可免费延迟至16:00；"]
    whole = "[1] 须知\n婚假为13天。[TRUNCATED]"
    assert packed_texts(whole, 1, drop_cut_clause=True) == ["婚假为13天。"]


def test_a_long_question_is_cut_in_the_prompt_at_a_sentence_end():
    question = "被告人某甲于某日晚间酒后驾车。" * 600  # 9,000 characters
    messages = generation.build_messages(question, "[1] 刑法 第一百三十三条之一\n在道路上醉酒驾驶机动车的，处拘役。")
    asked = messages[1]["content"].split("问题：", 1)[1]
    assert len(asked) < generation.MAX_PROMPT_QUESTION_CHARS + len(generation.GENERAL_PROMPT.instruction_zh) + 2
    assert "[TRUNCATED]" in asked and "。[TRUNCATED]" in asked


def test_the_prompt_is_the_packs_and_general_without_one():
    """A generic collection's answer is asked for as a careful assistant
    citing its sources; a law collection's also names law and article."""
    import domains

    general = build_messages("年假有几天？", "[1] 员工手册\n年假五天。")
    law = build_messages("年假有几天？", "[1] 劳动法\n年假五天。", domains.answer_prompt(["law_zh"]))
    assert "法律" not in general[0]["content"] and "条号" not in general[1]["content"]
    assert "[n]" in general[0]["content"]
    assert "法律问答" in law[0]["content"] and "条号" in law[1]["content"]
    assert domains.answer_prompt(["generic"]) is None
    english = build_messages("How many days of leave?", "[1] Handbook\nFive days.")
    assert "legal" not in english[0]["content"] and "[n]" in english[0]["content"]


def test_a_packs_worked_example_comes_before_the_question_in_its_language():
    """law_zh shows one corpus example (question, packed sources, a cited
    answer) as an earlier turn; the real question is the last message."""
    import domains

    prompt = domains.answer_prompt(["law_zh"])
    zh = build_messages("年假有几天？", "[1] 劳动法\n年假五天。", prompt)
    assert [m["role"] for m in zh] == ["system", "user", "assistant", "user"]
    assert prompt.example_zh.question in zh[1]["content"] and prompt.example_zh.context in zh[1]["content"]
    assert zh[2]["content"] == prompt.example_zh.answer and "年假有几天？" in zh[3]["content"]
    en = build_messages("How many days of leave?", "[1] Labour Law\nFive days.", prompt)
    assert en[2]["content"] == prompt.example_en.answer and en[1]["content"].startswith("Sources:")
    assert [m["role"] for m in build_messages("年假有几天？", "[1] 手册\n五天。")] == ["system", "user"]
    assert [m["role"] for m in build_messages("年假有几天？", "[1] 劳动法\n年假五天。", prompt, worked_example=False)] == \
        ["system", "user"]


def test_the_law_example_cites_every_sentence_and_is_no_evaluation_question():
    import json
    import re
    from pathlib import Path

    import domains

    example = domains.answer_prompt(["law_zh"]).example_zh
    sentences = [s for s in re.split(r"(?<=[。！？])", example.answer) if s]
    assert sentences and all(re.search(r"\[\d\]。$", s) for s in sentences)
    data = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "law-zh"
    questions = [json.loads(line)["query"] for path in sorted(data.glob("queries-*.jsonl")) for line in path.open()]
    if not questions:
        pytest.skip(f"no law dev sets at {data}")
    assert not any(example.question in q or q in example.question for q in questions)


def test_first_sources_cuts_the_context_before_the_next_numbered_source():
    context = "[1] 劳动法 第三十六条\n每日工作时间不超过八小时。\n[2] 劳动法 第三十八条\n每周至少休息一日。\n\n[3] 图谱\n[2] 不是标题的一行"
    assert generation.first_sources(context, 1) == "[1] 劳动法 第三十六条\n每日工作时间不超过八小时。"
    assert generation.first_sources(context, 2) == "[1] 劳动法 第三十六条\n每日工作时间不超过八小时。\n[2] 劳动法 第三十八条\n每周至少休息一日。"
    assert generation.first_sources(context, 3) == context  # "[2]" after [3] is a line of text, not a source
    assert generation.first_sources(context, 0) == context


def test_a_line_of_a_sources_text_that_looks_like_a_header_does_not_open_a_source():
    """A reference list or R output inside source [1] ("[2] Smith, 2020",
    "[1] 1 2 3"): with the sources' labels it stays in [1]'s text; a form
    feed or another script's digit does not start a source either."""
    context = ("[1] Paper\nReferences:\n[1] Jones, 2019\n[2] Smith, 2020\x0c[3] x\n[٢] y\n"
               "[2] R 入门\n> x\n[1] 1 2 3\n[3] 第三篇\n正文。")
    labels = ["Paper", "R 入门", "第三篇"]
    texts = generation.packed_texts(context, 3, labels)
    assert texts == ["References:\n[1] Jones, 2019\n[2] Smith, 2020\x0c[3] x\n[٢] y", "> x\n[1] 1 2 3", "正文。"]
    assert generation.first_sources(context, 1, labels).endswith("[٢] y")
    # labels that match no header (another fuser's format): the numbers alone decide, as before
    assert generation.packed_texts("[1] A\n甲\n[2] B\n乙", 2, ["X", "Y"]) == ["甲", "乙"]
