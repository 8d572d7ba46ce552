"""Numbered section headings of plain-text files (services/ingest/files/outline.py),
read through the .txt reader as a user's file would be."""
from __future__ import annotations

import pytest

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.library.file_ingest import document_from_file
from services.ingest.chunking import ChunkingConfig
from services.ingest.files import parse_file

pytestmark = pytest.mark.unit


def _paths(text: str) -> list[tuple[str, ...]]:
    return [tuple(s.heading_path) for s in parse_file("doc.txt", "", text.encode()).sections]


def _section_texts(text: str) -> dict[tuple[str, ...], str]:
    return {tuple(s.heading_path): "\n".join(b.text for b in s.blocks)
            for s in parse_file("doc.txt", "", text.encode()).sections}


NUMBERED_TEXT = """设计说明

1. 任务定义
系统回答统计指标问题。

2. 混合召回
2.1 模糊匹配
模糊匹配取 30 个候选。
处理顺序:
1. 精确匹配
2. 模糊匹配
2.2 向量检索
  1. 先归一化查询。
  2. 再做点积。
0.20 * fuzzy_score
32 输出项 = 31 评分项 + overall

3. 技术债务
规则权重仍依赖人工调参。
"""


def test_numbered_section_lines_of_a_text_file_become_its_outline():
    sections = _section_texts(NUMBERED_TEXT)
    # the first line alone before the outline is the title (model.title_line), not a section
    assert list(sections) == [("1. 任务定义",), ("2. 混合召回", "2.1 模糊匹配"), ("2. 混合召回", "2.2 向量检索"),
                              ("3. 技术债务",)]
    # a list restarting at 1, an indented list, numbers in prose and code stay text of their section
    assert "1. 精确匹配\n2. 模糊匹配" in sections[("2. 混合召回", "2.1 模糊匹配")]
    assert "1. 先归一化查询。" in sections[("2. 混合召回", "2.2 向量检索")]
    assert "0.20 * fuzzy_score\n32 输出项" in sections[("2. 混合召回", "2.2 向量检索")]
    doc = document_from_file(gateway_pb2.IngestFile(name="design.txt", content=NUMBERED_TEXT.encode()), "default",
                             ChunkingConfig())
    chunk = next(c for c in doc.record.chunks if "30 个候选" in c.text)
    assert chunk.heading_path == ["设计说明", "2. 混合召回", "2.1 模糊匹配"]
    assert "向量检索" not in chunk.text  # no chunk spans two sections


OFFICIAL_NOTICE = """关于加强数据管理的通知

一、总体要求
各单位应当建立数据台账。
（一）适用范围
本通知适用于全部门。
（二）职责分工
信息中心负责统筹。
二、具体措施
1. 数据分级
按敏感程度分为三级。
2. 访问控制
核心数据须经审批方可访问。
三、附则
本通知自发布之日起施行。
"""


def test_chinese_official_numbering_nests_as_gb_t_9704_orders_it():
    assert _paths(OFFICIAL_NOTICE) == [
        ("一、总体要求",), ("一、总体要求", "（一）适用范围"), ("一、总体要求", "（二）职责分工"),
        ("二、具体措施", "1. 数据分级"), ("二、具体措施", "2. 访问控制"), ("三、附则",)]


def test_a_level_skipped_in_one_section_and_used_in_the_next_nests_the_same():
    text = "一、基本情况\n1. 人员配置\n现有员工 120 人。\n二、主要措施\n（一）加强培训\n1. 新员工培训\n入职一周内完成。\n（二）完善制度\n修订办法。\n"
    assert _paths(text) == [("一、基本情况", "1. 人员配置"), ("二、主要措施", "（一）加强培训", "1. 新员工培训"),
                            ("二、主要措施", "（二）完善制度")]


@pytest.mark.parametrize("text, expected", [
    # a list restarting at 1 claims its own numbers: "2. macOS" does not take section 2's place
    ("1. 安装\n支持以下系统：\n1. Linux\n2. macOS\n\n2. 使用\n运行服务。\n\n3. 配置\n编辑配置。\n",
     [("1. 安装",), ("2. 使用",), ("3. 配置",)]),
    # steps 1-5 inside section 3, each with its line: sections 4 and 5 stay headings
    ("1. 简介\n正文\n2. 安装\n正文\n3. 快速开始\n1. 创建集合\n命令\n2. 导入文件\n命令\n3. 提问\n命令\n4. 查看引用\n说明\n"
     "5. 清理\n命令\n4. 部署\n正文\n5. 常见问题\n正文\n",
     [("1. 简介",), ("2. 安装",), ("3. 快速开始",), ("4. 部署",), ("5. 常见问题",)]),
    # a heading ending like a lead-in is taken back when the next one skips over it
    ("1. 概述\n正文\n\n2. 安装步骤：\n解压。\n\n3. 配置\n正文\n", [("1. 概述",), ("2. 安装步骤：",), ("3. 配置",)]),
    # a table of contents: its entries come again below, where the sections are
    ("手册\n目录\n1. 简介\n1.1 背景\n2. 安装\n\n1. 简介\n正文\n1.1 背景\n正文\n2. 安装\n正文\n",
     [("1. 简介",), ("1. 简介", "1.1 背景"), ("2. 安装",)]),
    # numbering restarts under each 第…章
    ("第一章 总则\n一、目的\n正文\n二、范围\n正文\n第二章 考勤\n一、工作时间\n正文\n二、请假\n正文\n",
     [("第一章 总则", "一、目的"), ("第一章 总则", "二、范围"), ("第二章 考勤", "一、工作时间"), ("第二章 考勤", "二、请假")]),
    # a thesis: 1.1 opens under 第一章 with no "1." line
    ("第一章 绪论\n1.1 研究背景\n正文\n1.2 研究意义\n正文\n", [("第一章 绪论", "1.1 研究背景"), ("第一章 绪论", "1.2 研究意义")]),
    # GB/T standards number without a dot; a full-width period; full-width indentation on every line
    ("1 范围\n正文\n2 术语\n2.1 检索\n正文\n", [("1 范围",), ("2 术语", "2.1 检索")]),
    ("1．概述\n正文\n2．安装\n正文\n", [("1．概述",), ("2．安装",)]),
    ("通知\n　　一、检查范围\n　　正文。\n　　二、检查内容\n　　正文。\n", [("一、检查范围",), ("二、检查内容",)]),
])
def test_outlines_that_lists_contents_and_chapters_do_not_break(text, expected):
    assert _paths(text) == expected


@pytest.mark.parametrize("text, heading", [
    ("1. 概述\n本文说明。\n2. 附录\n", "2. 附录"),               # the last heading has nothing under it
    ("一、总体要求\n（一）适用范围\n二、具体措施\n内容\n", "（一）适用范围"),  # nor has a heading before its sibling's parent
])
def test_a_heading_with_nothing_under_it_keeps_its_title(text, heading):
    sections = parse_file("doc.txt", "", text.encode()).sections
    assert any(b.text == heading for s in sections for b in s.blocks)


@pytest.mark.parametrize("text", [
    "1. 打开设置\n2. 选择账户\n3. 点击保存\n",                    # a list of steps: siblings on consecutive lines
    "说明\n\n1. 概述\n这是唯一的编号行。\n",                        # one numbered line is no outline
    "2. 背景\n正文。\n\n3. 方法\n正文。\n",                          # an outline that does not start at 1
    "1. 第一步：打开设置。\n正文\n2. 第二步：保存。\n正文\n",         # lines ending like sentences
    "1. 收费\n正文\n2.5元/GB 用于国内流量\n正文\n2.0版本说明\n正文\n",  # decimals are not section 2
])
def test_numbered_lines_that_are_no_outline_stay_text(text):
    paths = _paths(text)
    assert all(len(p) <= 1 for p in paths) and ("2.5元/GB 用于国内流量",) not in paths and ("2.0版本说明",) not in paths
    if not text.startswith("1. 收费"):
        assert all(not p for p in paths), paths


def test_a_quantity_where_the_next_number_would_be_does_not_stop_the_outline():
    text = "1. 网络\n1.1 地址规划\n10.0.0.1 网关\n1.2 倍于基准带宽\n1.3 防火墙\n默认拒绝。\n"
    sections = _section_texts(text)
    assert ("1. 网络", "1.3 防火墙") in sections and "1.2 倍于基准带宽" in sections[("1. 网络", "1.1 地址规划")]


def test_a_docx_typed_in_body_style_gets_its_numbered_outline():
    import io

    import docx

    document = docx.Document()
    for line in OFFICIAL_NOTICE.strip().split("\n"):
        if line:
            document.add_paragraph(line)
    document.add_paragraph("1. 打开设置")  # a list at the end: siblings in a row
    document.add_paragraph("2. 点击保存")
    out = io.BytesIO()
    document.save(out)
    parsed = parse_file("通知.docx", "", out.getvalue())
    assert parsed.title == "关于加强数据管理的通知"  # its first line, typed alone before the outline; never a numbered section
    sections = {tuple(s.heading_path): [b.text for b in s.blocks] for s in parsed.sections}
    assert ("一、总体要求", "（二）职责分工") in sections
    assert sections[("二、具体措施", "2. 访问控制")] == ["核心数据须经审批方可访问。"]
    assert sections[("三、附则",)] == ["本通知自发布之日起施行。", "1. 打开设置", "2. 点击保存"]


def test_a_pdf_set_in_one_font_size_gets_its_numbered_outline():
    from tests.file_makers import pdf_in_one_font_size

    data = pdf_in_one_font_size([line for line in OFFICIAL_NOTICE.strip().split("\n") if line])
    parsed = parse_file("通知.pdf", "", data)
    paths = [tuple(s.heading_path) for s in parsed.sections]
    assert parsed.title != "一、总体要求"  # a numbered section is not the document's title
    assert ("一、总体要求", "（一）适用范围") in paths and ("二、具体措施", "2. 访问控制") in paths and ("三、附则",) in paths


MANUAL_WITH_CONTENTS = ["星图同步工具 使用手册", "目录", "1. 安装 ........ 2", "2. 使用 ........ 3", "3. 常见问题 ........ 5",
                        "1. 安装", "下载安装包并解压。", "2. 使用", "运行 xingtu sync 开始同步。", "3. 常见问题", "同步失败时查看日志。"]


@pytest.mark.parametrize("name", ["manual.txt", "manual.pdf", "manual.docx"])
def test_a_typed_table_of_contents_is_left_out_and_its_sections_kept(name):
    import io

    import docx

    from tests.file_makers import pdf_in_one_font_size

    if name.endswith(".txt"):
        data = "\n".join(MANUAL_WITH_CONTENTS).encode()
    elif name.endswith(".pdf"):
        data = pdf_in_one_font_size(MANUAL_WITH_CONTENTS)
    else:
        document = docx.Document()
        for line in MANUAL_WITH_CONTENTS:
            document.add_paragraph(line)
        out = io.BytesIO()
        document.save(out)
        data = out.getvalue()
    parsed = parse_file(name, "", data)
    text = parsed.text()
    assert "目录" not in text and "........" not in text
    assert [tuple(s.heading_path) for s in parsed.sections][-3:] == [("1. 安装",), ("2. 使用",), ("3. 常见问题",)]
    assert "星图同步工具 使用手册" in text or parsed.title == "星图同步工具 使用手册"


def test_numbered_lines_that_come_again_as_content_are_not_a_table_of_contents():
    survey = "调查问卷\n问题1：你满意吗？\n1. 是\n2. 否\n问题2：你会推荐吗？\n1. 是\n2. 否\n"
    text = parse_file("survey.txt", "", survey.encode()).text()
    assert text.count("1. 是") == 2 and text.count("2. 否") == 2


def test_an_english_title_line_counts_its_words_not_its_letters():
    # a fresh user's security policy: its 49-character first line became a chunk of its own, the file name the title
    text = ("STARBRIDGE INFORMATION SECURITY AND ACCESS POLICY\n\n1. Accounts and passwords\n"
            "Passwords for company accounts must be at least 14 characters long.\n\n2. Laptops\n"
            "Company laptops must use full-disk encryption.\n")
    doc = document_from_file(gateway_pb2.IngestFile(name="security-policy.txt", content=text.encode()), "default",
                             ChunkingConfig())
    assert doc.record.title == "STARBRIDGE INFORMATION SECURITY AND ACCESS POLICY"
    assert not any(c.text.strip() == doc.record.title for c in doc.record.chunks)
    assert [c.heading_path[-1] for c in doc.record.chunks] == ["1. Accounts and passwords", "2. Laptops"]
