"""services.gateway.answer.named_codes: codes a question names that no passage found mentions."""
import pytest

from services.gateway.answer.named_codes import codes_not_found, not_found_reason
from tests.fakes import candidate

pytestmark = pytest.mark.unit

MANUAL = [candidate("m#1", "GA-37VSD 换油周期：每 4000 h 更换润滑油。错误代码 E102：排气温度过高。", "pg.keyword", 3.0),
          candidate("m#2", "备件 1622-0655-00 为油过滤器。R134a 充注量 48 kg。", "pg.keyword", 2.0)]


def test_a_code_held_by_a_passage_in_any_spelling_is_found():
    assert codes_not_found("ga37 换油周期", MANUAL) == []  # GA-37VSD holds it
    assert codes_not_found("Ｅ１０２ 怎么处理", MANUAL) == []  # full width
    assert codes_not_found("16220655 00 是什么", MANUAL) == []  # not a code here: spaces split it
    assert codes_not_found("r134a 充注量", MANUAL) == []


def test_a_code_no_passage_holds_is_named_in_the_questions_language():
    assert codes_not_found("GA-75VSD 换油周期", MANUAL) == ["GA-75VSD"]
    assert not_found_reason("GA-75VSD 换油周期", MANUAL) == "找到的资料中没有提到“GA-75VSD”"
    assert not_found_reason("What does error E205 mean?", MANUAL) == 'None of the passages found mentions "E205"'
    assert not_found_reason("E102 怎么处理", MANUAL) is None
    assert not_found_reason("GA-75VSD 换油周期", []) is None  # nothing found is another rule's case
