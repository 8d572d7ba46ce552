"""Regulations as a university office writes them, from a trial's set (tests/quality/data/dongchuan_docs):
Word files without heading styles (a centred title line, centred bold 第X章 lines) and PDFs that
LibreOffice 7.4 exported from Word, setting CJK text in Noto Sans CJK and the digits and curly quotes
in DejaVu Sans."""
from __future__ import annotations

from pathlib import Path

import pytest

from services.ingest.files import parse_file

pytestmark = pytest.mark.unit
SET = Path(__file__).resolve().parents[2] / "quality" / "data" / "dongchuan_docs"


def _parsed(name: str):
    return parse_file(name, "", (SET / name).read_bytes())


def _text(parsed) -> str:
    return "\n".join(b.text for s in parsed.sections for b in s.blocks)


def test_quotes_set_in_a_fallback_font_go_back_into_the_spaces_left_for_them():
    """和“三助”岗位津贴 read as 和 三“助 岗位津贴 … 招生”: the quotes came after their lines."""
    scholarships = _text(_parsed("奖助学金评定与发放办法.pdf"))
    assert "国家助学金和“三助”岗位津贴（助研、助教、助管）" in scholarships and "招生计划" in scholarships
    degrees = _text(_parsed("学位授予工作细则.pdf"))
    assert "评阅意见分为“同意答辩”“修改后答辩”“不同意答辩”三种。" in degrees  # two marks in one space: ”“


def test_a_number_in_a_sentence_is_not_a_table_cell_where_a_tables_column_starts():
    """30000 stood where a table's column starts: the sentence was cut there and the next line put in."""
    text = _text(_parsed("奖助学金评定与发放办法.pdf"))
    assert "博士研究生每生每年30000元。申请者须为二年级及以上研究生，名额按上级下达指标分配。" in text
    assert "东大研〔2024〕9号" in text and "本办法自2024年9月1日起施行" in text
    assert "类别 | 资助标准（元/年） | 每月发放（元） | 发放月数" in text


def test_a_cells_second_line_stays_in_its_cell():
    text = _text(_parsed("奖助学金评定与发放办法.pdf"))
    assert "博士研究生 | 二年级及以上 | 25000元（30%） | 15000元（50%） | 10000元（20%）" in text


def test_chapters_set_at_the_bodys_size_are_headings_and_articles_start_lines():
    parsed = _parsed("学位授予工作细则.pdf")
    paths = [s.heading_path for s in parsed.sections]
    assert ["东川大学学位授予工作细则", "第二章课程学习与学分要求"] in paths
    chapter = next(s for s in parsed.sections if s.heading_path[-1:] == ["第二章课程学习与学分要求"])
    lines = "\n".join(b.text for b in chapter.blocks).splitlines()
    assert lines[0].startswith("第二条学术学位硕士研究生应修满不少于32学分") and lines[1].startswith("第三条")


def test_a_word_file_without_heading_styles_gets_its_centred_title_and_its_chapters():
    parsed = _parsed("研究生学籍管理规定.docx")
    assert parsed.title == "东川大学研究生学籍管理规定"  # was its first chapter's line, 第一章 总则
    assert [s.heading_path for s in parsed.sections if s.heading_path][:2] == [["第一章 总则"], ["第二章 学习年限"]]
    styled = _parsed("学位论文查重管理办法.docx")  # Heading 1 sections under a centred title line
    assert styled.title == "东川大学研究生学位论文学术不端行为检测管理办法"
    assert ["一、检测范围与系统"] in [s.heading_path for s in styled.sections]


def test_a_text_files_chapter_line_without_its_space_is_a_heading():
    parsed = parse_file("规定.txt", "", "学籍规定\n\n第一章总则\n\n本规定适用于研究生。\n\n第二章 学习年限\n\n学制三年。\n"
                        "第三章的规定同样适用于非全日制研究生。\n".encode())
    assert [s.heading_path for s in parsed.sections] == [["第一章总则"], ["第二章 学习年限"]]
    assert "第三章的规定同样适用于非全日制研究生。" in _text(parsed)
