"""English sentences inside one line (services/gateway/answer/english_sentences.py)."""
import pytest

from services.gateway.answer.english_sentences import english_clauses_joined, english_sentences

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
