"""The packed-context format shared by the fuser and its readers."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from services.common.packed_context import join_blocks, source_label, split_blocks

pytestmark = pytest.mark.unit


def test_a_label_is_the_title_and_the_headings_below_it():
    cand = SimpleNamespace(title="劳动法", heading_path=["劳动法", "", "第四章", "第三十六条"])
    assert source_label(cand) == "劳动法 第四章 第三十六条"


def test_blocks_open_at_the_next_number_only_and_join_back():
    context = "前言\n[1] A\n甲\n[3] 不是下一个\n[2] B\n乙\n[٢] 另一种数字\n正文\x0c[3] 换页后"
    blocks = split_blocks(context)
    assert blocks == [("A", ["甲", "[3] 不是下一个"]), ("B", ["乙", "[٢] 另一种数字", "正文\x0c[3] 换页后"])]
    assert join_blocks(blocks) == context.split("\n", 1)[1]  # the text before [1] is not a block


def test_a_label_check_keeps_a_header_like_line_in_its_block():
    context = "[1] Paper\n[2] Smith, 2020\n[2] Notes\n正文"
    assert [label for label, _ in split_blocks(context)] == ["Paper", "Smith, 2020"]
    assert split_blocks(context, lambda n, label: label in {"Paper", "Notes"}) == [
        ("Paper", ["[2] Smith, 2020"]), ("Notes", ["正文"])]


def test_a_label_names_a_title_once_in_its_longer_wording():
    from types import SimpleNamespace

    from services.common.packed_context import source_label
    pdf = SimpleNamespace(title="青岚数据 IT服务台常见问题解答", heading_path=["青岚数据 IT服务台常见问题解答（FAQ）", "二、VPN与无线网络"])
    assert source_label(pdf) == "青岚数据 IT服务台常见问题解答（FAQ） 二、VPN与无线网络"
    law = SimpleNamespace(title="中华人民共和国刑法", heading_path=["中华人民共和国刑法", "第五章 侵犯财产罪", "", "第二百六十四条"])
    assert source_label(law) == "中华人民共和国刑法 第五章 侵犯财产罪 第二百六十四条"
    short = SimpleNamespace(title="手册", heading_path=["手册使用说明"])
    assert source_label(short) == "手册 手册使用说明"
