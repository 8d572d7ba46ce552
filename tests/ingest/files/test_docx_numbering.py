"""Word's automatic list numbers in .docx text (services/ingest/files/docx_numbering.py), on files
written by python-docx: its template's List Number and List Bullet styles, and a Chinese
two-level numbering definition added to the numbering part the way Word writes one."""
from __future__ import annotations

import io

import docx
import pytest
from docx.oxml import parse_xml

from services.ingest.files import parse_file
from services.ingest.files.docx_numbering import format_counter

pytestmark = pytest.mark.unit

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _blocks(document: docx.Document) -> list[str]:
    data = io.BytesIO()
    document.save(data)
    return [b.text for s in parse_file("手册.docx", "", data.getvalue()).sections for b in s.blocks]


def _numbered(paragraph, num_id: int, level: int) -> None:
    paragraph._p.get_or_add_pPr().insert(0, parse_xml(
        f'<w:numPr {W}><w:ilvl w:val="{level}"/><w:numId w:val="{num_id}"/></w:numPr>'))


def test_list_number_and_bullet_paragraphs_start_with_what_word_shows():
    # a fresh user's handbook steps came out as bare lines: "第三步是什么" had no 3 to find
    document = docx.Document()
    document.add_paragraph("入职步骤如下：")
    for step in ("领取工牌", "签订合同", "参加培训"):
        document.add_paragraph(step, style="List Number")
    for note in ("按时打卡", "保管好工牌"):
        document.add_paragraph(note, style="List Bullet")
    assert _blocks(document) == ["入职步骤如下：", "1. 领取工牌", "2. 签订合同", "3. 参加培训", "• 按时打卡", "• 保管好工牌"]


def test_a_chinese_two_level_list_counts_each_level_and_restarts_the_inner_one():
    document = docx.Document()
    numbering = document.part.numbering_part.element
    numbering.insert(0, parse_xml(
        f'<w:abstractNum {W} w:abstractNumId="90">'
        '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="chineseCounting"/><w:lvlText w:val="第%1条"/></w:lvl>'
        '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="chineseCounting"/><w:lvlText w:val="（%2）"/></w:lvl>'
        '</w:abstractNum>'))
    numbering.append(parse_xml(f'<w:num {W} w:numId="90"><w:abstractNumId w:val="90"/></w:num>'))
    for text, level in (("总则。", 0), ("年假。", 0), ("满一年的五天；", 1), ("满十年的十天。", 1), ("病假。", 0), ("须有病历。", 1)):
        _numbered(document.add_paragraph(text), 90, level)
    document.add_paragraph("本手册自发布之日起施行。")
    assert _blocks(document) == ["第一条 总则。", "第二条 年假。", "（一） 满一年的五天；", "（二） 满十年的十天。", "第三条 病假。",
                                 "（一） 须有病历。", "本手册自发布之日起施行。"]


def test_counters_in_words_formats():
    assert [format_counter(n, "chineseCounting") for n in (1, 10, 11, 20, 23)] == ["一", "十", "十一", "二十", "二十三"]
    assert [format_counter(n, "lowerLetter") for n in (1, 26, 27)] == ["a", "z", "aa"]
    assert format_counter(4, "upperRoman") == "IV" and format_counter(3, "ideographTraditional") == "丙"
    assert format_counter(7, "decimalZero") == "07" and format_counter(7, "someNewFormat") == "7"
