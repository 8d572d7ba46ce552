"""The note an answer ends with when it cites a source its pack gives a caveat (services/gateway/answer/source_caveats.py)."""
from __future__ import annotations

import pytest

from services.gateway.answer.source_caveats import caveat_note

pytestmark = pytest.mark.unit


def test_the_note_names_each_caveated_source_in_number_order():
    note = caveat_note("环境保护法怎么规定的？", {3: "历史版本", 1: "已废止", 2: ""})
    assert note == "注意：[1] 在资料中标注为“已废止”，[3] 在资料中标注为“历史版本”，所引内容可能已不再适用。"


def test_an_english_question_gets_the_note_in_english():
    assert caveat_note("What is the penalty for excess emissions?", {2: "已废止"}) == \
        'Note: [2] is marked "已废止" in the sources; what it says may no longer apply.'


def test_a_question_in_traditional_characters_gets_the_note_in_them():
    assert caveat_note("超標排放怎麼處罰？", {1: "已废止"}).startswith("注意：[1] 在資料中標註為")


def test_no_caveat_no_note():
    assert caveat_note("超标排放怎么处罚？", {1: "", 2: ""}) == ""
