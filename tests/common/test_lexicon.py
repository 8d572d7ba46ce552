"""The user dictionary: terms built from titles, headings and entity names
are kept whole by the tokenizer on both the document and the query side."""
from __future__ import annotations

import jieba
import pytest

import domains
from services.common import lexicon, text
from services.ingest.chunking import content_hash

pytestmark = pytest.mark.unit


@pytest.fixture
def user_dictionary():
    added: list[str] = []

    def load(terms: list[str]) -> str:
        added.extend(terms)
        return text.use_user_dictionary(terms)

    yield load
    for term in added:
        jieba.del_word(term)
    text.use_user_dictionary([])


def test_candidate_terms_from_titles_headings_and_entities():
    terms = lexicon.candidate_terms(
        titles=["中华人民共和国农民专业合作社法"],
        headings=["第七章 农民专业合作社联合社", "第一节"],
        entity_names=["三级医院", "马", "a b", "COVID"],
        title_aliases=domains.title_aliases,
    )
    assert terms == sorted(["三级医院", "农民专业合作社法", "农民专业合作社联合社", "中华人民共和国农民专业合作社法"])
    # without a pack's aliases a title is only itself
    assert "农民专业合作社法" not in lexicon.candidate_terms(titles=["中华人民共和国农民专业合作社法"])


def test_dictionary_file_round_trip(tmp_path):
    path = tmp_path / "dict.txt"
    assert lexicon.write_dictionary(["公司法", "三级医院", "公司法"], path) == 2
    assert lexicon.read_dictionary(path) == ["三级医院", "公司法"]
    assert lexicon.digest(["公司法", "三级医院"]) == lexicon.digest(["三级医院", "公司法"]) != ""


def test_query_term_stays_whole_and_does_not_match_its_parts(user_dictionary):
    assert "三级" in text.query_keywords("三级医院的收费标准")  # without the dictionary
    user_dictionary(["三级医院"])
    keywords = text.query_keywords("三级医院的收费标准")
    assert keywords[0] == "三级医院" and "三级" not in keywords and "医院" not in keywords
    # documents: the whole term where it occurs, never inside 二三级
    assert "三级医院" in text.document_terms("本市三级医院应当公开收费")
    assert "三级医院" not in text.document_terms("二三级公立医院")


def test_law_name_kept_whole(user_dictionary):
    user_dictionary(lexicon.candidate_terms(titles=["中华人民共和国农民专业合作社法"], title_aliases=domains.title_aliases))
    keywords = text.query_keywords("根据农民专业合作社法，合作社可以设立联合社吗？")
    assert "农民专业合作社法" in keywords and "合作社" not in keywords


def test_dictionary_change_changes_document_hashes(user_dictionary):
    before = content_hash("公司法", ["第一章"], "正文", {})
    user_dictionary(["公司法"])
    after = content_hash("公司法", ["第一章"], "正文", {})
    assert before != after
    assert after == content_hash("公司法", ["第一章"], "正文", {})
