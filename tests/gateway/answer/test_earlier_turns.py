"""A chat follow-up's earlier turns in the query (services/gateway/answer/earlier_turns.py): written before
the question, read back apart from it, and the new subject of a follow-up that swaps the earlier one's."""
import pytest

from services.gateway.answer.earlier_turns import split_earlier, swapped_subject, with_earlier

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("question, earlier", [
    ("那孩子呢？", ["退休人员门诊报销比例多少"]),
    ("what about kids?", ["What is the refund (in days) for adults?", "and seniors"]),
    ("（括号）里的呢", ["第一问（注）", "第二问"]),
])
def test_a_query_written_with_earlier_turns_reads_back_as_those_turns_and_the_question(question, earlier):
    query = with_earlier(question, earlier)
    back_earlier, back_question = split_earlier(query)
    assert back_question == question
    assert all(turn in back_earlier for turn in earlier)


def test_a_query_without_earlier_turns_is_all_question():
    assert split_earlier("退休人员门诊报销比例多少") == ("", "退休人员门诊报销比例多少")
    assert split_earlier("(Earlier unclosed question") == ("", "(Earlier unclosed question")


@pytest.mark.parametrize("question, subject", [
    ("那孩子呢？", "孩子"), ("企业版呢", "企业版"), ("如果是洋房的呢", "洋房"), ("那15栋呢？", "15栋"),
    ("What about enterprise?", "enterprise"), ("and the Pro plan?", "Pro plan"),
    ("多少钱封顶？", ""), ("能报多少", ""), ("周末开门吗", ""), ("那要多久呢，一般情况下", ""),
])
def test_only_a_follow_up_naming_a_new_subject_alone_swaps_the_earlier_subject(question, subject):
    assert swapped_subject(question) == subject
