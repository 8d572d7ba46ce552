"""A query's words in the other writing system (services.common.cross_lingual):
the dictionary both ways, the word-by-word coverage the fuser compares
passages of two languages with, and the check of a request's translation."""
from __future__ import annotations

import pytest

from graphmesh.common.v1 import types_pb2
from services.common.cross_lingual import (MAX_TERMS_PER_WORD, MAX_TRANSLATED_WORDS, Lexicon, inflections, lemmas,
                                           other_script, translation_from_message, word_coverage)
from services.common.errors import InvalidArgument

pytestmark = pytest.mark.unit

#: A few CC-CEDICT-shaped entries: (simplified headword, glosses).
ENTRIES = [
    ("密码", ["cipher", " secret code", "password", " PIN"]),
    ("口令", ["password", "watchword"]),
    ("账号", ["account number", " username"]),
    ("轮换", ["to rotate", " to take turns"]),
    ("位", ["position", "location", "classifier for people (honorific)"]),
    ("卡车", ["truck", "CL:輛|辆[liang4]"]),
    ("公里", ["kilometer"]),
    ("年假", ["annual leave"]),
    ("周一", ["Monday"]),
    ("礼拜一", ["Monday"]),
]


@pytest.fixture(scope="module")
def small() -> Lexicon:
    return Lexicon(ENTRIES)


def test_glosses_become_words_and_notes_and_explanations_are_dropped(small):
    assert small.english_of["密码"][:4] == ["cipher", "ciphers", "secret", "secrets"]
    assert "rotate" in small.english_of["轮换"] and "rotated" in small.english_of["轮换"]  # a verb's -ed and -ing
    assert small.english_of["位"] == ["position", "positions"]  # one character: its first gloss only
    assert "cl" not in " ".join(small.english_of["卡车"])  # "CL:輛|辆" is a note, not a translation
    assert small.chinese_of["password"] == ["密码", "口令"]
    assert small.chinese_of["annual leave"] == ["年假"]


def test_inflections_and_lemmas_of_regular_english_words():
    assert inflections("policy") == ["policy", "policies"]
    assert inflections("limit", verb=True) == ["limit", "limits", "limited", "limiting"]
    assert "policy" in lemmas("policies") and "fill" in lemmas("filled") and "stop" in lemmas("stopped")
    assert "kilometer" in lemmas("kilometres") and "tire" in lemmas("tyre") and "color" in lemmas("colour")
    # a fresh trial's questions: "carried", "notified" and "the doctor's note" had no translation
    assert "carry" in lemmas("carried") and "notify" in lemmas("notified")
    assert lemmas("doctor's")[:2] == ["doctor's", "doctor"] and "station" in lemmas("stations'")


def test_a_chinese_question_gets_english_terms_and_an_english_one_chinese(small):
    concepts = dict((w, terms) for w, terms, _ in small.concepts("公司账号的密码最短要多少位？", "latin"))
    assert "password" in concepts["密码"] and "accounts" in concepts["账号"]
    english = {w: terms for w, terms, _ in small.concepts("How many kilometres of annual leave does a truck get?", "cjk")}
    assert english["annual leave"] == ["年假"]  # a phrase the dictionary glosses whole
    assert english["kilometres"] == ["公里"] and english["truck"] == ["卡车"]
    assert "many" not in english  # the word after "how" asks, it is not asked about
    # a product name a Chinese question keeps in English is a term as it is
    assert ("vault", ["vault"], []) in small.concepts("Vault 里的密码多久轮换一次？", "latin")
    # a query already written in the target system has nothing to translate
    assert small.concepts("password rotation", "latin") == [] and small.translate("密码", "cjk") == []


def test_synonyms_are_the_words_of_the_same_language_the_dictionary_translates_alike(small):
    synonyms = {w: s for w, _, s in small.concepts("礼拜一开门吗", "latin")}
    assert synonyms["礼拜一"] == ["周一"]
    assert small.synonyms("密码", ["password"]) == ["口令"]


def test_other_script():
    assert other_script("How long is a Bearer token valid?") == "cjk"
    assert other_script("试用期是多长时间？") == "latin"
    assert other_script("12345") == ""


def test_word_coverage_reads_passages_of_both_languages_through_the_question_words():
    words = [("密码", ["password", "passwords"], ["口令"]), ("账号", ["account", "accounts"], []),
             ("船", ["boat", "boats"], [])]
    english, chinese, synonym, other = word_coverage(
        ["Passwords for company accounts must be long.", "公司账号的密码至少 12 位。", "口令每月更换。",
         "Shipping pins are stored in the warehouse."], words)
    assert english == pytest.approx(chinese) and english > synonym > 0.0
    assert other == 0.0  # "pin" and "boat" are not found inside "shipping" or "pins"
    # a one-character Chinese form holds nothing: 船 is inside 船只 and 渡船 and every word with it
    assert word_coverage(["渡船停运。"], [("船", ["boat"], [])]) == [0.0]
    # ...so its translations credit no passage either (年假 cut as 年 / 假 must not favour "year" over 年休假);
    # its synonyms of two characters or more still count
    split = [("年", ["year"], []), ("假", ["vacation"], ["假期"])]
    english, chinese = word_coverage(["Home office equipment is reimbursed once per year, not vacation.", "年休假五天。"], split)
    assert english == chinese == 0.0
    english, chinese = word_coverage(["Vacation days: 5 per year.", "假期五天。"], split)
    assert english == 0.0 < chinese
    # a word asking a count is held where a number stands in its place, as its translation is in English
    english, chinese, other = word_coverage(["Two days per week.", "年休假五天。", "提前三个工作日申请。"],
                                            [("几天", ["days"], [])])
    assert english == chinese > other == 0.0
    assert word_coverage(["休 14 天"], [("几天", ["days"], [])]) == word_coverage(["days"], [("几天", ["days"], [])])
    assert word_coverage(["any"], []) == [0.0]


def test_translation_from_message_is_checked():
    message = types_pb2.QueryTranslation(script="latin", words=[types_pb2.TranslatedWord(word="密码", terms=["password"],
                                                                                           synonyms=["口令"])])
    assert translation_from_message(message) == ("latin", [("密码", ["password"], ["口令"])])
    assert translation_from_message(types_pb2.QueryTranslation()) == ("", [])
    with pytest.raises(InvalidArgument) as bad_script:
        translation_from_message(types_pb2.QueryTranslation(script="greek", words=message.words))
    assert bad_script.value.field == "translation.script"
    with pytest.raises(InvalidArgument) as too_many:
        translation_from_message(types_pb2.QueryTranslation(script="latin", words=[message.words[0]] * (MAX_TRANSLATED_WORDS + 1)))
    assert too_many.value.field == "translation.words"
    with pytest.raises(InvalidArgument) as too_many_terms:
        translation_from_message(types_pb2.QueryTranslation(script="latin", words=[
            types_pb2.TranslatedWord(word="x", terms=["t"] * (MAX_TERMS_PER_WORD + 1))]))
    assert too_many_terms.value.field == "translation.words[0].terms"


def test_the_shipped_dictionary_translates_both_ways():
    lexicon = Lexicon.load()
    assert "password" in lexicon.translate("公司账号的密码最短要多少位？", "latin")
    assert "卡车" in lexicon.translate("What is the per-kilometre charge for using a field truck?", "cjk")
    assert "公里" in lexicon.translate("What is the per-kilometre charge for using a field truck?", "cjk")
    # the usual translations first (jieba's word counts), not the dictionary's pinyin order
    assert lexicon.chinese_of["drive"].index("驾驶") < lexicon.chinese_of["drive"].index("乘车")
    # however long the question, a word carries no more terms than a request may
    assert all(len(terms) <= MAX_TERMS_PER_WORD and len(synonyms) <= MAX_TERMS_PER_WORD
               for _, terms, synonyms in lexicon.concepts("time " * 40 + "leave take get make", "cjk"))


def test_a_passage_in_traditional_characters_holds_the_questions_simplified_words():
    """The query's words come simplified (text.simplified): a trial's English onboarding note ("days") went first
    for 8 of 37 Chinese questions over Taiwan rules, whose traditional passages held none of those words."""
    words = [("丧假", ["funeral leave"], []), ("几天", ["days"], [])]
    taiwan, english = word_coverage(["員工祖父母喪亡者，給予喪假三日。", "The IT helpdesk is open five days a week."], words)
    assert taiwan > english
