from services.gateway import generation
from services.gateway.generation import EXTRACTIVE_LABEL, build_messages, clean_answer, extractive_answer


def test_clean_answer_removes_citations_without_source_and_fences():
    cleaned = clean_answer("```markdown\n应当支付二倍工资[1][4]。\n```", n_sources=2)
    assert cleaned.text == "应当支付二倍工资[1]。"
    assert cleaned.invalid_citations_removed == 1
    assert cleaned.fences_removed == 2


def test_extractive_answer_quotes_whole_sentences_with_citations():
    answer = extractive_answer(["第一句。第二句。", "另一条。"], max_chars_per_source=5)
    lines = answer.splitlines()
    assert lines[0] == EXTRACTIVE_LABEL
    assert lines[1] == "第一句。 [1]"
    assert lines[2] == "另一条。 [2]"


def test_prompt_carries_numbered_context_and_question():
    messages = build_messages("问题？", "[1] 法\n条文。")
    assert "[1] 法\n条文。" in messages[1]["content"] and "问题？" in messages[1]["content"]


def test_clean_answer_unwraps_a_json_answer_and_counts_it():
    cleaned = clean_answer('{"answer": "应当支付二倍工资[1][3]。"}', n_sources=1)
    assert cleaned.text == "应当支付二倍工资[1]。"
    assert cleaned.fences_removed == 1 and cleaned.invalid_citations_removed == 1


def test_a_long_question_is_cut_in_the_prompt_at_a_sentence_end():
    question = "被告人某甲于某日晚间酒后驾车。" * 600  # 9,000 characters
    messages = generation.build_messages(question, "[1] 刑法 第一百三十三条之一\n在道路上醉酒驾驶机动车的，处拘役。")
    asked = messages[1]["content"].split("问题：", 1)[1]
    assert len(asked) < generation.MAX_PROMPT_QUESTION_CHARS + len(generation.ANSWER_INSTRUCTION) + 2
    assert "[TRUNCATED]" in asked and "。[TRUNCATED]" in asked
