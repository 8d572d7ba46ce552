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


def test_analyse_translates_the_query_words_into_the_other_writing_system():
    chinese = analyse("公司账号的密码最短要多少位？")
    assert chinese.translated_script == "latin"
    assert ("password" in dict((w, t) for w, t, _ in chinese.translated_words)["密码"])
    english = analyse("How long is a Bearer token valid?")
    assert english.translated_script == "cjk" and english.translated_words
    # switched off, or nothing to translate (no letters): no translation
    assert analyse("公司账号的密码", translate=False).translated_words == []
    assert analyse("12345").translated_script == "" and analyse("12345").translated_words == []


def test_a_traditional_question_is_analysed_in_simplified_characters():
    """The normalised query is what the expander embeds and routes: a trial's
    traditional question over simplified documents was refused (answerability
    0.06) for want of keywords and of a close vector."""
    result = analyse("公積金貸款可以每個月自動扣公積金還嗎")
    assert result.normalized_query == "公积金贷款可以每个月自动扣公积金还吗"
    assert "公积金" in result.keywords and "贷款" in result.keywords


def test_html_pasted_with_a_question_is_left_out_of_it():
    """A trial pasted its product page before "how long warranty in australia": the code rule refused over
    "dataLayer" and "WELCOME10" from its tracking script and banner."""
    from services.expander.core import without_markup

    page = ('<div class="product-title">Homvia KT-210 Electric Kettle</div><script>window.dataLayer=[];'
            'gtag("WELCOME10")</script><!-- banner --><span>Ships &amp; returns</span> how long warranty in australia')
    analysed = analyse(page)
    assert analysed.normalized_query == "Homvia KT-210 Electric Kettle Ships & returns how long warranty in australia"
    assert not any("datalayer" in k.lower() or "welcome10" in k.lower() for k in analysed.keywords)
    assert without_markup("x<y 时怎么办") == "x<y 时怎么办" and without_markup("<br>") == "<br>"


def test_a_packs_notation_rewrites_the_query_before_its_keywords_are_cut():
    """law_zh writes an article number as the statutes do; the generic path leaves the question as asked."""
    law = analyse("民法典第1077条是什么内容", domain_packs=["law_zh"])
    assert law.normalized_query == "民法典第一千零七十七条是什么内容"
    assert analyse("民法典第1077条是什么内容", domain_packs=["generic"]).normalized_query == "民法典第1077条是什么内容"
