import pytest
from services.common.text import (
    TRUNCATION_MARK,
    document_terms,
    latin_script,
    normalize,
    query_keywords,
    in_script_of,
    simplified,
    traditional,
    split_sentences,
    truncate_at_boundary,
    weekdays_alike,
)

pytestmark = pytest.mark.unit


def test_normalize_folds_full_width_and_whitespace():
    assert normalize("  ＡＢＣ１２３\u3000劳动  合同 ") == "ABC123 劳动 合同"


def test_query_keywords_drop_stop_words_and_punctuation_and_dedupe():
    keywords = query_keywords("什么是劳动合同？劳动合同的期限是多久？")
    assert "什么" not in keywords and "的" not in keywords and "？" not in keywords
    assert keywords.count("劳动合同") == 1
    assert "期限" in keywords


def test_document_terms_keep_frequencies_for_bm25():
    terms = document_terms("专利权 专利权 期限")
    assert terms.count("专利权") == 2


def test_split_sentences_round_trips():
    text = "第一句。第二句！第三句？\n尾巴"
    parts = split_sentences(text)
    assert parts == ["第一句。", "第二句！", "第三句？", "\n", "尾巴"]
    assert "".join(parts) == text


def test_truncate_cuts_at_sentence_end_and_marks():
    text = "甲乙丙丁。戊己庚辛壬癸。" + "子丑寅卯辰巳午未。" * 5
    cut, truncated = truncate_at_boundary(text, 15 + len(TRUNCATION_MARK))
    assert truncated
    assert cut == "甲乙丙丁。戊己庚辛壬癸。" + TRUNCATION_MARK


def test_truncate_keeps_short_text():
    assert truncate_at_boundary("短句。", 100) == ("短句。", False)


def test_truncate_falls_back_to_hard_cut_without_boundary():
    cut, truncated = truncate_at_boundary("一" * 50, 20)
    assert truncated and len(cut) == 20 and cut.endswith(TRUNCATION_MARK)


def test_english_function_words_are_not_query_keywords():
    keywords = query_keywords("What is the maximum number of vacation days an employee can carry over?")
    assert keywords[:1] == ["maximum"] and "vacation" in keywords and "days" in keywords
    assert not {"what", "is", "the", "of", "an", "can"} & set(keywords)


def test_latin_script_is_most_letters_latin():
    assert latin_script("What does HMAC-SHA256 sign?") and latin_script("Où est la gare ?")
    assert not latin_script("Lumen 代理的配置文件在哪里？") and not latin_script("2024") and not latin_script("")
    assert latin_script("Where is the 王府井 office?") and not latin_script("secret key 轮换之后旧的 key 还能用多久？")


def test_number_terms_join_an_arabic_number_to_the_character_after_it():
    from services.common.text import document_terms, keyword_terms, number_terms

    assert number_terms("3号仓库第5排货架") == ["3号", "5排"]
    assert number_terms("报销 60 元，共30天，1.5倍") == ["60元", "30天", "1.5倍"]
    assert number_terms("第五十条 v2.3版 abc 12") == ["2.3版"]  # Chinese numerals and a number at the end give none
    assert keyword_terms("3号仓库的3号门", ["3", "号", "仓库"]) == ["3", "号", "仓库", "3号"]
    assert document_terms("3号仓库")[-1] == "3号" and "3" in document_terms("3号仓库")


def test_numbered_names_are_ordinals_and_numbered_items_not_quantities():
    from services.common.text import numbered_names

    assert numbered_names("3号仓库第5排货架") == ["3号", "5排"]
    assert numbered_names("工作满12年，请假5天，见第 3 条，地铁12号线") == ["3条", "12号"]


def test_a_document_s_writing_system_is_latin_only_with_next_to_no_cjk_characters():
    from services.common.text import CJK_SCRIPT, LATIN_SCRIPT, writing_system

    assert writing_system("Quiet hours are from 22:00 to 07:00 in the Boathouse; the word 安静 means quiet.") == LATIN_SCRIPT
    assert writing_system("配额表 QUOTA_PG = ceil(6000 × 0.25) = 1500，向量检索 pgvector chunk top 20") == CJK_SCRIPT
    assert writing_system("车辆使用费按每公里 0.6 美元计入项目经费。") == CJK_SCRIPT
    assert writing_system("12 | 34 | 56") == "" and writing_system("") == ""


def test_weekdays_are_written_one_way():
    assert weekdays_alike("星期一开门吗？礼拜三呢？星期天、礼拜天、周天和周日") == "周一开门吗？周三呢？周日、周日、周日和周日"
    assert weekdays_alike("一星期两次，每周三次") == "一星期两次，每周三次"  # a week, not a day of it


def test_simplified_writes_traditional_characters_simplified_and_leaves_the_rest():
    assert simplified("公積金貸款可以每個月自動扣嗎") == "公积金贷款可以每个月自动扣吗"
    assert simplified("瞭解一下") == "了解一下"  # a phrase, not a character alone
    assert simplified("中华人民共和国著作权法") == "中华人民共和国著作权法"
    assert simplified("冷蔵エリアの温度範囲") == "冷蔵エリアの温度範囲"  # Japanese: kana present
    assert simplified("GA-37VSD 10 bar") == "GA-37VSD 10 bar"


def test_a_question_in_traditional_characters_gets_the_terms_of_a_simplified_document():
    """Both sides of the keyword channels tokenise through simplified(): a
    traditional question finds simplified text and the reverse."""
    asked = query_keywords("居住証要錢嗎？補辦收多少")
    assert asked == query_keywords("居住证要钱吗？补办收多少") and "补办" in asked
    assert set(document_terms("補辦居住證")) == set(document_terms("补办居住证"))


def test_fixed_messages_follow_a_traditional_question():
    assert traditional("婚假有幾天？") and not traditional("婚假有几天？") and not traditional("How many days?")
    assert in_script_of("婚假有幾天？", "检索到的资料不足以回答这个问题。") == "檢索到的資料不足以回答這個問題。"
    assert in_script_of("婚假有几天？", "检索到的资料不足以回答这个问题。") == "检索到的资料不足以回答这个问题。"
