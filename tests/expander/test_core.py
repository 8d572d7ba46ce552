import pytest
from services.expander.core import CONCEPT, FACTUAL, MULTI_HOP, POLICY, analyse, detect_question_type

pytestmark = pytest.mark.unit


def test_question_types_and_downgrades():
    assert detect_question_type("什么是实用新型") == (CONCEPT, 0.85)
    assert detect_question_type("公司不签劳动合同是否违法") == (POLICY, 0.85)
    assert detect_question_type("为什么会导致合同无效")[0] == MULTI_HOP
    assert detect_question_type("专利权期限二十年") == (FACTUAL, 0.5)
    kind, confidence = detect_question_type("什么是违约责任，为什么要承担")
    assert confidence == 0.6 and kind in (CONCEPT, POLICY, MULTI_HOP)


def test_analyse_normalises_and_extracts_keywords():
    result = analyse("  什么是　实用新型？ ")
    assert result.normalized_query == "什么是 实用新型?"
    assert "实用" in result.keywords or "实用新型" in result.keywords
    assert all(origin == "keyword" for _, origin in result.expansions)
