import pytest

from services.common.errors import InvalidArgument, validate_query

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("query", ["", "   ", "？？！。，、……", "--- !!! ...", "😀🙂", "__"])
def test_a_query_without_a_word_character_is_invalid_and_names_the_field(query):
    with pytest.raises(InvalidArgument) as err:
        validate_query(query, 100, field="messages[0].content")
    assert err.value.field == "messages[0].content"


@pytest.mark.parametrize("query", ["  C++ ？ ", "劳动法", "429", "é"])
def test_a_query_with_one_letter_digit_or_cjk_character_is_kept_stripped(query):
    assert validate_query(query, 100) == query.strip()


def test_length_and_nul_are_checked_too():
    with pytest.raises(InvalidArgument, match="is 11 characters; the maximum is 10"):
        validate_query("a" * 11, 10)
    with pytest.raises(InvalidArgument, match="NUL"):
        validate_query("a\x00b", 10)
