"""File parsers on real files of each format with Chinese text, made by
well-kept writers (tests/file_makers.py)."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from services.ingest.chunking import ChunkingConfig, chunk_sections
from services.ingest.files import DOCX, FileParseError, media_type_of, parse_file
from services.ingest.files.text import decode_text
from tests import file_makers as mk

pytestmark = pytest.mark.unit


def _sections(parsed) -> list[tuple[list[str], str]]:
    return [(s.heading_path, "\n".join(b.text for b in s.blocks)) for s in parsed.sections]


def _table_rows() -> list[str]:
    return [" | ".join(r) for r in mk.TABLE]


def test_multi_page_pdf_keeps_headings_pages_and_table_rows():
    parsed = parse_file("办法.pdf", "", mk.pdf_bytes(pages_of_filler=2))
    assert parsed.media_type == "application/pdf" and parsed.pages == 4
    assert parsed.title == mk.TITLE  # the PDF's own title
    sections = _sections(parsed)
    assert sections[0] == ([mk.CHAPTER_1], mk.PARAGRAPH_1)
    assert sections[1] == ([mk.CHAPTER_1, mk.SECTION_1], mk.PARAGRAPH_2)
    assert sections[2][0] == [mk.CHAPTER_2]
    lines = sections[2][1].splitlines()
    assert lines[:4] == [mk.PARAGRAPH_3, *_table_rows()]
    assert lines[4:] == mk.long_chinese_text(12, "附则0") + mk.long_chinese_text(12, "附则1")  # wrapped lines re-joined
    pages = [b.page for s in parsed.sections for b in s.blocks]
    assert pages[:3] == [1, 1, 2] and set(pages[3:]) == {3, 4}
    # the filler pages stay under the last heading, and chunks carry their pages
    rec = chunk_sections("d", parsed.title, [parsed.title], parsed.sections, {}, ChunkingConfig(128, 16))
    pages = [c.metadata["page"] for c in rec.chunks]
    assert pages[:2] == ["1", "1"] and pages[2] == "2-3"  # chapter 2 starts on page 2 and runs on
    assert pages[-1] == "4" and "3-4" in pages
    assert all(c.heading_path[0] == mk.TITLE for c in rec.chunks)


#: A PDF written by fpdf2 2.8.9 with a subset of Noto Sans CJK SC embedded (a Type0 font whose
#: encoding is an embedded Identity CMap): pypdf reads a NUL before each of its characters.
FPDF2_CJK = Path(__file__).parent / "data" / "fpdf2_cjk.pdf"


def test_fpdf2_cjk_pdf_reads_without_control_characters():
    parsed = parse_file("服务台.pdf", "", FPDF2_CJK.read_bytes())
    assert parsed.title == "服务台常见问题"
    assert _sections(parsed) == [(["服务台常见问题", "一、账号"], "域账号密码每90天必须修改一次。连续输错6次，账号锁定30分钟。"),
                                 (["服务台常见问题", "二、网络"], "VPN 每天凌晨2点断开一次，重新连接即可。")]


def test_a_pdf_table_cell_that_wraps_is_one_cell_again():
    parsed = parse_file("网络.pdf", "", mk.wrapped_table_pdf_bytes())
    rows, _ = mk.WRAPPED_TABLE
    lines = _sections(parsed)[0][1].splitlines()
    assert lines[0] == "以下为各网络的连接参数："
    assert lines[1:] == [" | ".join(c for c in row if c) for row in rows]  # the empty 备注 cell has no text to show


def test_encrypted_pdf_fails_with_a_clear_reason():
    with pytest.raises(FileParseError, match="encrypted PDF: needs a password"):
        parse_file("秘密.pdf", "application/pdf", mk.encrypted_pdf_bytes())


def test_scanned_pdf_without_text_layer_fails():
    with pytest.raises(FileParseError, match=r"no text layer \(scanned PDF\?\)"):
        parse_file("扫描件.pdf", "", mk.scanned_pdf_bytes())


def test_corrupt_pdf_and_docx_fail_with_their_reason():
    with pytest.raises(FileParseError, match="not a readable PDF"):
        parse_file("坏.pdf", "", b"%PDF-1.7\n garbage that is not a PDF")
    with pytest.raises(FileParseError, match=r"not a valid \.docx: corrupt, or not a zip archive"):
        parse_file("坏.docx", "", b"PK\x03\x04 this is no zip archive")
    other_zip = io.BytesIO()
    with zipfile.ZipFile(other_zip, "w") as archive:
        archive.writestr("notes.txt", "不是 Word 文档")
    with pytest.raises(FileParseError, match=r"a zip archive without a Word document in it"):
        parse_file("其实是压缩包.docx", "", other_zip.getvalue())
    truncated = mk.docx_bytes()[:2000]
    with pytest.raises(FileParseError, match="docx"):
        parse_file("截断.docx", "", truncated)


def test_docx_headings_title_and_table():
    parsed = parse_file("办法.docx", "", mk.docx_bytes(["附录：本办法自发布之日起施行。"]))
    assert parsed.title == mk.TITLE
    sections = _sections(parsed)
    assert sections[0] == ([mk.CHAPTER_1], mk.PARAGRAPH_1)
    assert sections[1] == ([mk.CHAPTER_1, mk.SECTION_1], mk.PARAGRAPH_2)
    assert sections[2] == ([mk.CHAPTER_2], "\n".join([mk.PARAGRAPH_3, "\n".join(_table_rows()), "附录：本办法自发布之日起施行。"]))


def test_gb18030_text_is_detected_and_chapters_become_headings():
    data = mk.text_gb18030()
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    text, encoding = decode_text(data)
    assert encoding == "gb18030" and "𠀀" in text
    parsed = parse_file("制度.txt", "", data)
    assert parsed.title == "制度"
    assert _sections(parsed) == [([mk.CHAPTER_1], mk.PARAGRAPH_1), ([mk.CHAPTER_1, mk.SECTION_1], mk.PARAGRAPH_2 + "𠀀"),
                                 ([mk.CHAPTER_2], mk.PARAGRAPH_3)]


def test_utf8_with_and_without_bom_and_utf16():
    assert decode_text(mk.text_utf8_bom()) == (f"{mk.CHAPTER_1}\n{mk.PARAGRAPH_1}\n", "utf-8-sig")
    assert decode_text("纯文本".encode("utf-8")) == ("纯文本", "utf-8")
    assert decode_text("\ufeff宽字符".encode("utf-16-le"))[0] == "宽字符"
    with pytest.raises(FileParseError, match="binary"):
        parse_file("x.txt", "", b"\x00\x01\x02\x00binary")


def test_western_single_byte_text_reads_as_windows_1252_and_central_european_as_cp1250():
    # a fresh user's Latin-1 file was stored as "Café crčme brűlée" (charset-normalizer's cp1250, a tie)
    menu = "Café crème brûlée is on the menu every Friday.\nThe kitchen closes at 22:00."
    assert decode_text(menu.encode("latin-1")) == (menu, "cp1252")
    polish = "Zażółć gęślą jaźń. Pracownicy mają prawo do urlopu w wymiarze 20 dni."
    assert decode_text(polish.encode("cp1250")) == (polish, "cp1250")  # Windows-1252 reads it as Za¿ó³æ: kept
    czech = "Příliš žluťoučký kůň úpěl ďábelské ódy."
    assert decode_text(czech.encode("cp1250"))[0] == czech  # bytes Windows-1252 has no character for


def test_utf8_cut_inside_its_last_character_or_with_a_stray_byte_is_read_as_utf8():
    rule = "第一条 员工每年享有带薪年休假，具体天数按工龄计算。"
    cut = rule.encode("utf-8")[:-1]  # a download cut short, inside 。
    assert decode_text(cut) == (rule[:-1], "utf-8")
    stray = (rule * 3).encode("utf-8").replace("带".encode("utf-8"), b"\xff", 1)  # one bad byte among 70 characters
    text, encoding = decode_text(stray)
    assert encoding == "utf-8" and text.count("\ufffd") == 1 and text.endswith(rule)
    # GB18030 and Windows-1252 bytes are not taken for damaged UTF-8 (the tests above)
    assert decode_text(rule.encode("gb18030")) == (rule, "gb18030")


def test_markdown_headings_and_table():
    parsed = parse_file("办法.md", "", mk.markdown_text().encode())
    assert parsed.title == mk.TITLE
    sections = _sections(parsed)
    assert sections[0] == ([mk.TITLE, mk.CHAPTER_1], mk.PARAGRAPH_1)
    assert sections[1] == ([mk.TITLE, mk.CHAPTER_1, mk.SECTION_1], mk.PARAGRAPH_2)
    assert sections[2] == ([mk.TITLE, mk.CHAPTER_2], "\n".join([mk.PARAGRAPH_3, "\n".join(_table_rows())]))


def test_markdown_ordered_items_keep_their_numbers_and_bullets_their_text():
    """A trial's "1. 检查油位…" of a .md file was stored as "检查油位…" while the .txt reader kept the number."""
    text = "# 保养\n\n1. 检查油位。\n2. 更换滤芯，\n   拧紧螺栓。\n\n- 备注一\n\n5) 记录读数。\n"
    sections = _sections(parse_file("保养.md", "", text.encode()))
    assert sections == [(["保养"], "1. 检查油位。\n2. 更换滤芯，\n拧紧螺栓。\n备注一\n5) 记录读数。")]


def test_csv_and_tsv_are_one_table_of_rows_under_the_header():
    """A trial's spare-parts list (.csv) was skipped as an unsupported type. Written by the csv module:
    quoted cells with commas and line breaks, an empty row, GB18030 bytes."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerows([["件号", "名称", "适用机型"], ["1622-0655-00", "空气滤芯, Air filter", "GA-37VSD"], [],
                      ["2906-0567-00", "最小压力阀\n套件", "GA-37VSD"]])
    parsed = parse_file("备件/备件清单.csv", "", out.getvalue().encode("gb18030"))
    assert parsed.title == "备件清单" and parsed.media_type == "text/csv"
    assert _sections(parsed) == [([], "件号 | 名称 | 适用机型\n1622-0655-00 | 空气滤芯, Air filter | GA-37VSD\n"
                                      "2906-0567-00 | 最小压力阀 套件 | GA-37VSD")]
    tsv = parse_file("codes.tsv", "", "code\tmeaning\nE102\t排气温度过高\n".encode())
    assert tsv.media_type == "text/tab-separated-values" and tsv.text() == "code | meaning\nE102 | 排气温度过高"
    with pytest.raises(FileParseError, match="no cell holds a value"):
        parse_file("empty.csv", "", b",,\n,,\n")


def test_html_drops_navigation_and_scripts():
    parsed = parse_file("办法.html", "text/html; charset=utf-8", mk.html_text().encode())
    assert parsed.title == mk.TITLE
    text = parsed.text()
    for gone in ("导航菜单", "脚本内容不应出现", "页眉广告", "版权所有", "color:red"):
        assert gone not in text
    sections = _sections(parsed)
    assert sections[0] == ([mk.CHAPTER_1], mk.PARAGRAPH_1)
    assert sections[1] == ([mk.CHAPTER_1, mk.SECTION_1], mk.PARAGRAPH_2)
    assert sections[2] == ([mk.CHAPTER_2], "\n".join([mk.PARAGRAPH_3, "\n".join(_table_rows())]))


def test_html_of_a_government_page_keeps_its_own_title_and_leaves_its_breadcrumb_and_view_count_out():
    # a trial's 办事指南: every citation label carried the site's name, and the trail and the view count were chunks
    page = ("<html><head><title>居住证申领办事指南_办事服务_杭州市公安局</title></head><body>"
            "<div class=\"breadcrumb\">当前位置：<a href=\"/\">首页</a> &gt; 办事服务</div>"
            "<p>您的位置：首页 > 户政服务</p><h1>居住证申领办事指南</h1>"
            "<p class=\"meta\">发布时间：2026-02-10　来源：市公安局　浏览次数：12873</p>"
            "<h2>一、申领条件</h2><p>在本市居住半年以上的，可以申领居住证。日均访问量：5000人次。</p></body></html>")
    parsed = parse_file("指南.html", "text/html", page.encode())
    assert parsed.title == "居住证申领办事指南"
    text = parsed.text()
    assert "当前位置" not in text and "您的位置" not in text and "浏览次数" not in text
    assert "日均访问量：5000人次" in text  # a count in the content, with no publishing facts beside it, stays
    plain = "<html><head><title>Release notes - Acme</title></head><body><h1>What changed</h1><p>x</p></body></html>"
    assert parse_file("n.html", "text/html", plain.encode()).title == "Release notes - Acme"  # not its h1 joined


def test_media_types_and_unsupported_files():
    assert media_type_of("a/b.PDF") == "application/pdf"
    assert media_type_of("x", "text/markdown; charset=utf-8") == "text/markdown"
    assert media_type_of("x.xlsx") == ""
    with pytest.raises(FileParseError, match="unsupported file type '.xlsx'"):
        parse_file("表.xlsx", "", b"data")
    # the type is the last path part's: a dot in a folder's name or a leading dot is not an extension
    assert media_type_of("release.v2/README") == "" and media_type_of("notes.d\\a.Md") == "text/markdown"
    for name in ("release.v2/README", "../../etc/passwd", ".env"):
        with pytest.raises(FileParseError, match="unsupported file type 'no extension'"):
            parse_file(name, "", b"data")
    with pytest.raises(FileParseError, match="empty file"):
        parse_file("空.txt", "", b"")
    with pytest.raises(FileParseError, match="no text"):
        parse_file("空白.md", "", b"\n\n   \n")


def test_a_writers_placeholder_author_is_not_stored_and_a_real_one_is():
    import io

    import docx

    assert "author" not in parse_file("a.docx", "", mk.docx_bytes()).metadata  # python-docx writes "python-docx"
    assert "author" not in parse_file("a.pdf", "", mk.pdf_bytes(1)).metadata  # reportlab writes "(anonymous)"
    document = docx.Document(io.BytesIO(mk.docx_bytes()))
    document.core_properties.author = "李娜"
    named = io.BytesIO()
    document.save(named)
    assert parse_file("b.docx", "", named.getvalue()).metadata["author"] == "李娜"


def test_pdf_table_cells_whose_gap_is_underestimated_are_split_where_other_rows_start_a_column():
    """reportlab's default table: 'Price per month' seems by its character count to touch 'Users
    included'; the rows whose cells stand clearly apart show where each column starts."""
    import io

    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Table

    rows = [["Plan", "Price per month", "Users included", "Support"], ["Starter", "49 USD", "5", "Email"],
            ["Pro", "199 USD", "25", "Email and chat"], ["Enterprise", "Custom quote", "Unlimited", "Dedicated manager"]]
    buffer = io.BytesIO()
    styles = getSampleStyleSheet()
    SimpleDocTemplate(buffer, pagesize=A4).build([
        Paragraph("Price list 2025", styles["Heading1"]),
        Paragraph("All prices exclude VAT and are billed monthly in advance.", styles["Normal"]), Table(rows)])
    text = "\n".join(b.text for s in parse_file("prices.pdf", "", buffer.getvalue()).sections for b in s.blocks)
    assert [" | ".join(r) for r in rows] == [line for line in text.split("\n") if "|" in line]
    assert "All prices exclude VAT and are billed monthly in advance." in text.split("\n")


def test_a_pdf_or_docx_named_as_text_is_read_as_what_it_is():
    """A trial's PDF sent as x.txt was stored as 8 chunks of PDF syntax."""
    as_text = parse_file("报告.txt", "", mk.pdf_bytes())
    assert as_text.media_type == "application/pdf" and as_text.title == mk.TITLE and "%PDF" not in as_text.text()
    as_markdown = parse_file("办法.md", "text/markdown", mk.docx_bytes())
    assert as_markdown.media_type == DOCX and mk.PARAGRAPH_1 in as_markdown.text()
    other_zip = io.BytesIO()
    with zipfile.ZipFile(other_zip, "w") as archive:
        archive.writestr("notes.txt", "不是 Word 文档")
    with pytest.raises(FileParseError, match=r"a zip archive without a Word document in it"):
        parse_file("压缩包.txt", "", other_zip.getvalue())
    assert parse_file("说明.txt", "", "PDF 格式说明：%PDF- 开头的是 PDF。".encode()).media_type == "text/plain"


def test_a_text_that_merely_starts_like_a_pdf_is_read_as_text_and_a_pdf_after_blanks_as_a_pdf():
    """A second trial: a memo starting "%PDF-1.7 is the version we target" was refused as an unreadable PDF,
    and a PDF led by a byte order mark or blanks, named .txt, was stored as PDF syntax."""
    memo = parse_file("memo.md", "", "%PDF-1.7 is the version we target; see section 2.\n\nMore memo text here.\n".encode())
    assert memo.media_type == "text/markdown" and "version we target" in memo.text()
    assert parse_file("zip-like.txt", "text/plain", b"PK\x03\x04 is how a zip archive starts.").media_type == "text/plain"
    for lead in (b"\n  ", b"\xef\xbb\xbf"):
        led = parse_file("报告.txt", "", lead + mk.pdf_bytes())
        assert led.media_type == "application/pdf" and led.title == mk.TITLE and "%PDF" not in led.text()
    with pytest.raises(FileParseError, match="not a readable PDF"):  # binary that is not a PDF stays refused
        parse_file("坏.txt", "", b"%PDF-1.7\n\xff\xfe garbage that is not a PDF")


def test_a_markdown_front_matter_is_the_documents_metadata_not_its_text():
    """A trial's runbook front matter (team, owner) was stored as its first chunk, under the heading "team: sre owner: 黄晨"."""
    page = ("---\nteam: sre\nowner: 黄晨\ntags: [nginx, ingress]\nreviewed: 2026-03-01\nlinks: {wiki: x}\n"
            "bad key: x\ntitle: Nginx reload\n---\n\n## 步骤\n\n先执行 nginx -t 检查语法。\n")
    parsed = parse_file("nginx-reload.md", "", page.encode())
    assert parsed.title == "Nginx reload"  # the front matter's title, no level-1 heading being there
    assert {k: v for k, v in parsed.metadata.items() if k != "encoding"} == {
        "team": "sre", "owner": "黄晨", "tags": "nginx, ingress", "reviewed": "2026-03-01"}
    assert _sections(parsed) == [(["步骤"], "先执行 nginx -t 检查语法。")]
    ruled = parse_file("a.md", "", "# 标题\n\n正文。\n\n---\n\n后文。\n".encode())  # a rule later on is no front matter
    assert _sections(ruled) == [(["标题"], "正文。\n后文。")] and set(ruled.metadata) == {"encoding"}


def test_a_pdf_title_that_wraps_is_one_heading_and_a_list_keeps_its_numbers_apart():
    """A trial's reportlab title over three lines made three headings, two of them chunks that held only their
    own words; its numbered claim steps read "1Call the 24-hour hotline"."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import ListFlowable, ListItem, Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()
    title = "Hang On Insurance Company Limited - WorldCover Travel Protection: English Version of Selected Sections"
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=A4).build([
        Paragraph(title, styles["Title"]),
        Paragraph("This English version covers the Claims section only.", styles["BodyText"]),
        Paragraph("Section 9 - Claims", styles["Heading1"]),
        ListFlowable([ListItem(Paragraph(t, styles["BodyText"])) for t in (
            "Call the 24-hour hotline before any hospital admission overseas.",
            "Report loss of baggage to the local police within 24 hours.")], bulletType="1")])
    parsed = parse_file("travel.pdf", "", buffer.getvalue())
    sections = _sections(parsed)
    assert sections[0] == ([title], "This English version covers the Claims section only.")
    assert sections[1] == (["Section 9 - Claims"], "1. Call the 24-hour hotline before any hospital admission "
                           "overseas. 2. Report loss of baggage to the local police within 24 hours.")


def test_a_pdf_paragraph_set_larger_than_its_table_and_a_cell_wrapped_around_the_rows_middle():
    """A trial's school calendar (reportlab, STSong-Light): each 10.5 pt paragraph's first line over a 10 pt
    table became a heading, cut mid-sentence, and a row whose last cell wrapped, the others set in its middle,
    read "高一、高二年级；高三按全市联考安" / "11月4日—11月6日 | 期中考试" / "排"."""
    import io

    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Table, TableStyle

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    title = ParagraphStyle("t", fontName="STSong-Light", fontSize=16, leading=22)
    body = ParagraphStyle("b", fontName="STSong-Light", fontSize=10.5, leading=16)
    cell = ParagraphStyle("c", fontName="STSong-Light", fontSize=10, leading=14)
    rows = [("日期", "事项", "备注"), ("8月31日", "学生报到注册", "全体学生，上午8:00—11:30"),
            ("10月16日", "第一次月考", "语文、数学、英语三科"), ("11月4日—11月6日", "期中考试", "高一、高二年级；高三按全市联考安排"),
            ("1月22日", "休业式，发放成绩单和寒假作业", "上午10:00"), ("1月23日", "寒假开始", "下学期2月22日报到")]
    table = Table([[Paragraph(c, cell) for c in r] for r in rows], colWidths=[130, 170, 180])
    table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black), ("VALIGN", (0, 0), (-1, -1), "MIDDLE")]))
    intro = "本学期自2026年8月31日开始，至2027年1月22日结束，共21周。寒假自2027年1月23日起，下学期2月22日报到注册，2月23日正式上课。"
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=A4).build([Paragraph("第一学期校历", title), Paragraph(intro, body), table])
    parsed = parse_file("校历.pdf", "", buffer.getvalue())
    assert [s.heading_path for s in parsed.sections] == [["第一学期校历"]]
    text = "\n".join(b.text for s in parsed.sections for b in s.blocks)
    assert intro in text.split("\n")
    assert [" | ".join(r) for r in rows] == [line for line in text.split("\n") if "|" in line]


def test_a_pdf_paragraph_ending_in_an_english_sentence_is_not_joined_to_the_chinese_one_after_it():
    """A trial's reply templates read "…arrive within 3-5 days.模板B（产品有问题）：…" as one line, so an answer quoting
    template A ran into template B."""
    import io

    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    body = ParagraphStyle("b", fontName="STSong-Light", fontSize=10.5, leading=16)
    templates = ["模板A（物流延误）：Sorry for the delay. Your parcel is on the way and will arrive within 3-5 days.",
                 "模板B（产品有问题）：We are sorry the item did not work as expected. Could you send us a photo?"]
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=A4).build([Paragraph(t, body) for t in templates])
    lines = "\n".join(b.text for s in parse_file("模板.pdf", "", buffer.getvalue()).sections for b in s.blocks).split("\n")
    assert templates == lines


def test_a_one_line_gbk_text_is_read_as_gbk_and_bom_less_utf16_still_as_utf16():
    """A trial's one-line GBK notice was stored as Hangul: charset-normalizer guessed UTF-16 without a BOM."""
    from services.ingest.files.text import decode_text

    line = "早餐加一个煎蛋收5元。\n"
    assert decode_text(line.encode("gbk")) == (line, "gb18030")
    assert decode_text(line.encode("utf-16-be"))[0] == line  # its line end holds a NUL byte: UTF-16 it is


def test_an_english_pdf_line_wrapped_after_a_closing_bracket_goes_on():
    """A trial's expense policy read "…issued to Nordhavn Instruments (Shanghai)" / "Co., Ltd. with the company tax
    ID." as two lines, and answers opened with "Co., Ltd."."""
    import io

    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    sentence = ("Every invoice (fapiao) must be a VAT special invoice issued to Nordhavn Instruments (Shanghai) Co., "
                "Ltd. with the company tax ID and the exact amount claimed, dated within the claim period.")
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=A4).build([Paragraph(sentence, getSampleStyleSheet()["Normal"])])
    text = "\n".join(b.text for s in parse_file("policy.pdf", "", buffer.getvalue()).sections for b in s.blocks)
    assert "\n" not in text.strip() and "(Shanghai) Co., Ltd." in text
