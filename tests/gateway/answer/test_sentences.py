"""Sentences and the pieces they are quoted in (services/gateway/answer/sentences.py)."""
import pytest

from services.gateway.answer.sentences import english_clauses_joined, english_sentences, text_pieces

pytestmark = pytest.mark.unit


def test_english_sentences_of_one_line_are_cut_apart_but_not_after_abbreviations_initials_or_list_numbers():
    assert english_sentences("Leave is 15 days a year. Unused days expire on March 31. See the HR portal.") == [
        "Leave is 15 days a year.", "Unused days expire on March 31.", "See the HR portal."]
    for whole in ("Ask Dr. Smith or J. Smith, e.g. Monday.", "1. Download the installer.", "使用 Python. 然后运行。"):
        assert english_sentences(whole) == [whole]


def test_a_semicolon_before_lower_case_on_the_same_line_joins_two_clauses_and_a_capital_or_new_line_does_not():
    assert english_clauses_joined(["Keys can be rotated;", " the old key works for 24 hours."]) == [
        "Keys can be rotated; the old key works for 24 hours."]
    assert english_clauses_joined(["Keys can be rotated;", " The old key works."]) == ["Keys can be rotated;", " The old key works."]
    assert english_clauses_joined(["Keys can be rotated;", "\nthe old key works."]) == ["Keys can be rotated;", "\nthe old key works."]


def test_pieces_cut_at_a_semicolon_on_one_line_share_their_sentence():
    text = "活动开始前72小时以上取消的，全额退款；72小时以内取消的，不予退款。\n报名截止日为3月1日；\n名额有限。"
    pieces = text_pieces(text)
    assert [piece for piece, _ in pieces] == ["活动开始前72小时以上取消的，全额退款；", "72小时以内取消的，不予退款。",
                                              "报名截止日为3月1日；", "名额有限。"]
    numbers = [number for _, number in pieces]
    assert numbers[0] == numbers[1] < numbers[2] < numbers[3]  # a semicolon before a line break ends its sentence
    english = [number for _, number in text_pieces("Open daily. Closed on 25 December.")]
    assert english[0] < english[1]
