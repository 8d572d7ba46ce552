"""What real files keep of their structure: raw HTML blocks in Markdown,
PDF sub-headings a point larger than the body, and the title once in each
chunk's heading path (files made by reportlab and markdown writers)."""
from __future__ import annotations

import pytest

from graphmesh.gateway.v1 import gateway_pb2
from services.ingest.chunking import ChunkingConfig
from services.gateway.library.file_ingest import document_from_file
from services.ingest.files import parse_file
from tests.file_makers import docx_bytes, markdown_text, markdown_with_html_blocks, pdf_bytes, pdf_with_small_subheadings

pytestmark = pytest.mark.unit


def test_markdown_html_blocks_are_kept_as_text():
    parsed = parse_file("fees.md", "", markdown_with_html_blocks().encode())
    text = parsed.text()
    assert "基础版 | 30元" in text and "专业版 | 98元" in text
    assert "退款须在购买后七日内申请" in text
    assert "<table>" not in text and "<div" not in text


def test_pdf_subheadings_a_point_larger_than_the_body_are_split_from_their_paragraph():
    parsed = parse_file("travel.pdf", "", pdf_with_small_subheadings())
    paths = {tuple(s.heading_path): [b.text for b in s.blocks] for s in parsed.sections}
    assert ("差旅费用管理办法", "住宿标准") in paths and ("差旅费用管理办法", "交通标准") in paths
    assert paths[("差旅费用管理办法", "住宿标准")][0].startswith("一线城市")
    assert not any("住宿标准一线城市" in b for blocks in paths.values() for b in blocks)


def test_the_title_appears_once_in_every_chunk_heading_path():
    files = [("guide.md", markdown_text().encode()), ("guide.pdf", pdf_bytes(0)), ("fees.md", markdown_with_html_blocks().encode()),
             ("travel.pdf", pdf_with_small_subheadings()), ("guide.docx", docx_bytes())]
    for name, content in files:
        doc = document_from_file(gateway_pb2.IngestFile(name=name, content=content), "default", ChunkingConfig())
        for chunk in doc.record.chunks:
            assert len(chunk.heading_path) == len(set(chunk.heading_path)), (name, chunk.heading_path)
            assert chunk.heading_path[0] == doc.record.title


def test_line_number_gutters_of_pasted_code_listings_are_dropped():
    # a blog post pasted as text: the gutter column lands as lines 1..n before the code
    pasted = "排序函数\n\n关闭 Embedding 时权重如下：\n1\n2\n3\nscore = (\n    0.35 * fuzzy_score\n)\n\n第1步\n1\n"
    text = parse_file("post.txt", "", pasted.encode()).text()
    assert "关闭 Embedding 时权重如下：\nscore = (\n0.35 * fuzzy_score\n)" in text
    assert text.endswith("第1步\n1")  # a lone "1" is content, not a gutter


@pytest.mark.parametrize("content", [
    "$ seq 3\n1\n2\n3",           # program output ending the block
    "id\n1\n2\n3\n\n下一段。",      # a column of ids
    "Indices:\n0\n1\n2\n3\nend\nof list",  # a count that started at 0
    "斐波那契：\n1\n2\n3\n5\n8",   # numbers going on past the run
    "1\n2\n3\n4",                # a file of numbers only
])
def test_counts_that_are_content_are_kept(content):
    text = parse_file("numbers.txt", "", content.encode()).text()
    assert [line for line in text.split("\n") if line.strip().isdigit()] == \
        [line for line in content.split("\n") if line.strip().isdigit()]


def test_html_code_tables_lose_their_gutter_cell_and_numbered_tables_keep_theirs():
    page = ('<html><body><h1>排序函数</h1><figure class="highlight"><table><tr>'
            '<td class="gutter"><pre><span>1</span><br><span>2</span><br><span>3</span></pre></td>'
            '<td class="code"><pre><span>score = (</span><br><span>0.35 * fuzzy_score</span><br><span>)</span></pre></td>'
            '</tr></table></figure>'
            '<table><tr><td>1</td><td>基础版</td></tr><tr><td>2</td><td>专业版</td></tr></table>'
            '<table><tr><td>1 2 3</td><td>电梯停靠的楼层</td></tr></table></body></html>')
    text = parse_file("post.html", "", page.encode()).text()
    assert "score = ( 0.35 * fuzzy_score )" in text.split("\n")  # the code row, its gutter cell gone
    assert "1 | 基础版\n2 | 专业版" in text
    assert "1 2 3 | 电梯停靠的楼层" in text  # no highlighter's gutter class: content


BOXES_SIDE_BY_SIDE = """流程图
┌──────────────┐  ┌──────────────┐
│ 阶段2: 粗检索 │  │ 阶段3: 精炼   │
│ CHUNKS (25)  │  │ 展开(1-hop)  │
└──────────────┘  └──────────────┘
"""
BOX_TABLE = """┌──────┬──────┬──────┐
│ 套餐 │ 备注 │ 价格 │
├──────┼──────┼──────┤
│ 基础 │      │ 30元 │
│ 专业 │      │ 98元 │
└──────┴──────┴──────┘
"""
SEQUENCE_DIAGRAM = """ 客户端       网关        缓存
   │            │           │
   │─ 1.请求 ──►│           │
   │            │─ 2.查询 ─►│
   │◄─ 3.响应 ──│           │
"""
BOXES_JOINED_BY_AN_ARROW = """┌──────────┐     ┌──────────┐
│ 阶段1    │     │ 阶段2    │
│ 解析文件 │ ──► │ 切分文本 │
└──────────┘     └──────────┘
"""


def test_boxes_drawn_side_by_side_are_read_one_box_after_another():
    parsed = parse_file("flow.txt", "", BOXES_SIDE_BY_SIDE.encode())
    text = parsed.text()
    assert "阶段2: 粗检索\nCHUNKS (25)\n阶段3: 精炼\n展开(1-hop)" in text
    assert "粗检索 │" not in text


def test_boxes_joined_by_an_arrow_are_read_one_box_after_another():
    text = parse_file("flow.txt", "", BOXES_JOINED_BY_AN_ARROW.encode()).text()
    assert "阶段1\n解析文件\n阶段2\n切分文本" in text


@pytest.mark.parametrize("drawing, kept", [
    # a table's edges join (┬ ┼): an empty column is a cell, not the gap between two boxes
    (BOX_TABLE, "│ 基础 │      │ 30元 │\n│ 专业 │      │ 98元 │"),
    # lifelines are not boxes: the messages keep their order
    (SEQUENCE_DIAGRAM, "│─ 1.请求 ──►│           │\n│            │─ 2.查询 ─►│\n│◄─ 3.响应 ──│"),
])
def test_tables_and_diagrams_that_are_not_boxes_side_by_side_keep_their_lines(drawing, kept):
    assert kept in parse_file("drawing.txt", "", drawing.encode()).text()


def _chunks(name: str, content: bytes):
    doc = document_from_file(gateway_pb2.IngestFile(name=name, content=content), "default", ChunkingConfig())
    return doc.record.title, [(c.heading_path, c.text) for c in doc.record.chunks]


def _unstyled_title_docx(core_title: str = "") -> bytes:
    import io

    import docx

    document = docx.Document()
    document.core_properties.title = core_title
    document.add_paragraph("员工休假管理制度")  # typed as a plain paragraph, no Title or Heading style
    document.add_heading("一、年休假", level=1)
    document.add_paragraph("员工累计工作已满1年不满10年的，年休假5天。")
    document.add_heading("二、婚假", level=1)
    document.add_paragraph("员工依法办理结婚登记的，享受婚假3天。")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_title_typed_as_the_first_line_is_the_title_and_no_chunk_of_its_own():
    text = "星辰云盘常见问题解答\n\n一、账号与登录\n\n1. 忘记密码怎么办？\n点击忘记密码重置。\n\n二、存储空间\n\n免费版提供 10GB 空间。\n"
    title, chunks = _chunks("faq.txt", text.encode())
    assert title == "星辰云盘常见问题解答"
    assert [path for path, _ in chunks] == [["星辰云盘常见问题解答", "一、账号与登录"], ["星辰云盘常见问题解答", "二、存储空间"]]
    title, chunks = _chunks("leave.docx", _unstyled_title_docx())
    assert title == "员工休假管理制度"
    assert not any(text.strip() == "员工休假管理制度" for _, text in chunks)
    assert [path[1] for path, _ in chunks] == ["一、年休假", "二、婚假"]


def test_a_first_line_that_is_not_alone_or_reads_as_a_sentence_stays_text():
    for text in ("发表于 2025 年\n第二行说明文字\n\n一、概述\n\n正文。\n\n二、细节\n\n正文。\n",  # two lines before the first heading
                 "本办法自发布之日起施行。\n\n一、概述\n\n正文。\n\n二、细节\n\n正文。\n"):  # a sentence
        title, chunks = _chunks("notes.txt", text.encode())
        assert title == "notes"
        assert chunks[0][0] == ["notes"] and text.split("\n", 1)[0] in chunks[0][1]
    # a .docx whose own title differs keeps its first line as text
    title, chunks = _chunks("leave.docx", _unstyled_title_docx("人事制度汇编"))
    assert title == "人事制度汇编" and chunks[0][1] == "员工休假管理制度"
