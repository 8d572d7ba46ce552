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
