"""Real files of every supported format with Chinese text, made by
well-kept writers (reportlab for PDF with its built-in STSong-Light CJK
font, python-docx for Word, pypdf's writer for encryption), for the file
ingestion tests and bench/files_ingest.py. Each maker returns the file's
bytes; the text it holds is in the module constants so tests can look for it."""
from __future__ import annotations

import io

TITLE = "差旅费管理办法"
CHAPTER_1 = "第一章 总则"
SECTION_1 = "第一节 适用范围"
CHAPTER_2 = "第二章 报销标准"
PARAGRAPH_1 = "为了规范公司员工差旅费报销，加强财务管理，制定本办法。本办法适用于公司全体正式员工。"
PARAGRAPH_2 = "员工出差应当事先填写出差申请单，经部门负责人批准后方可出行。“未经批准的出差，费用不予报销。”"
PARAGRAPH_3 = "住宿费按照城市类别分级报销，超出标准的部分由个人承担。"
TABLE = [["城市类别", "住宿标准（元/晚）", "伙食补助（元/天）"], ["一类城市", "600", "100"], ["二类城市", "450", "80"]]


def long_chinese_text(paragraphs: int, seed: str = "规定") -> list[str]:
    """``paragraphs`` distinct Chinese paragraphs of about 120 characters."""
    return [f"第{i}条{seed}：员工在第{i}项事务中应当遵守公司制度，按照流程提交材料，由负责人审核后办理；"
            f"逾期未办理的，视为放弃申请。该项事务编号为{i:04d}，归档期限为{i % 7 + 3}年。" for i in range(1, paragraphs + 1)]


def pdf_bytes(pages_of_filler: int = 1, title: str = TITLE, filler_seed: str = "附则") -> bytes:
    """A multi-page PDF: headings (larger font) on page 1 and 2, a table on
    page 2, ``pages_of_filler`` more pages of body text after it."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Table

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    base = getSampleStyleSheet()
    h1 = ParagraphStyle("h1", parent=base["Heading1"], fontName="STSong-Light", fontSize=18, leading=24)
    h2 = ParagraphStyle("h2", parent=base["Heading2"], fontName="STSong-Light", fontSize=14, leading=20)
    body = ParagraphStyle("body", parent=base["BodyText"], fontName="STSong-Light", fontSize=10.5, leading=16, wordWrap="CJK")
    story = [Paragraph(CHAPTER_1, h1), Paragraph(PARAGRAPH_1, body), Paragraph(SECTION_1, h2), Paragraph(PARAGRAPH_2, body),
             PageBreak(), Paragraph(CHAPTER_2, h1), Paragraph(PARAGRAPH_3, body),
             Table(TABLE, style=[("FONTNAME", (0, 0), (-1, -1), "STSong-Light")])]
    for page in range(pages_of_filler):
        story += [PageBreak(), *(Paragraph(p, body) for p in long_chinese_text(12, f"{filler_seed}{page}"))]
    out = io.BytesIO()
    SimpleDocTemplate(out, pagesize=A4, title=title).build(story)
    return out.getvalue()


#: A network table whose narrow cells wrap: (rows as written, column widths in points). The second
#: row's 备注 is empty; the third row's 用途 wraps over three lines.
WRAPPED_TABLE = ([["网络名称", "用途", "认证方式", "备注"],
                  ["QL-Staff", "员工办公Wi-Fi", "802.1X（PEAP）", "仅限公司配发的电脑"],
                  ["QL-Guest", "访客Wi-Fi", "短信验证码", ""],
                  ["QL-IoT", "会议室投屏与打印机以及门禁", "MAC地址白名单", "由IT部统一登记"]],
                 [70, 60, 90, 120])


def wrapped_table_pdf_bytes() -> bytes:
    """A PDF with one gridded table of WRAPPED_TABLE (cells as CJK-wrapping paragraphs, as
    reportlab lays out text too long for its column)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Table, TableStyle

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    body = ParagraphStyle("body", fontName="STSong-Light", fontSize=11, leading=17, wordWrap="CJK")
    cell = ParagraphStyle("cell", fontName="STSong-Light", fontSize=9.5, leading=13, wordWrap="CJK")
    rows, widths = WRAPPED_TABLE
    table = Table([[Paragraph(c, cell) for c in row] for row in rows], colWidths=widths)
    table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, "black"), ("VALIGN", (0, 0), (-1, -1), "TOP")]))
    out = io.BytesIO()
    SimpleDocTemplate(out, pagesize=A4, title="网络设置").build([Paragraph("以下为各网络的连接参数：", body), table])
    return out.getvalue()


def scanned_pdf_bytes() -> bytes:
    """A PDF page with only drawing on it (no text layer), as a scan has."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    c = canvas.Canvas(out, pagesize=A4)
    c.rect(50, 50, 400, 600, fill=1)
    c.showPage()
    c.save()
    return out.getvalue()


def encrypted_pdf_bytes(password: str = "secret") -> bytes:
    """The PDF of ``pdf_bytes`` encrypted (AES-128 when the cryptography
    package is there, else RC4) with a user password, by pypdf's writer."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(0))))
    try:
        writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-128")
    except Exception:  # noqa: BLE001 - no AES provider: RC4 is built in
        writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_bytes(paragraphs: list[str] | None = None) -> bytes:
    """A .docx with a title, Heading 1 / Heading 2 paragraphs, body text and a table."""
    import docx

    document = docx.Document()
    document.core_properties.title = TITLE
    document.add_heading(CHAPTER_1, level=1)
    document.add_paragraph(PARAGRAPH_1)
    document.add_heading(SECTION_1, level=2)
    document.add_paragraph(PARAGRAPH_2)
    document.add_heading(CHAPTER_2, level=1)
    document.add_paragraph(PARAGRAPH_3)
    table = document.add_table(rows=len(TABLE), cols=len(TABLE[0]))
    for r, row in enumerate(TABLE):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    for p in paragraphs or []:
        document.add_paragraph(p)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def markdown_text() -> str:
    rows = "\n".join("| " + " | ".join(r) + " |" for r in TABLE[1:])
    return (f"# {TITLE}\n\n## {CHAPTER_1}\n\n{PARAGRAPH_1}\n\n### {SECTION_1}\n\n{PARAGRAPH_2}\n\n## {CHAPTER_2}\n\n"
            f"{PARAGRAPH_3}\n\n| {' | '.join(TABLE[0])} |\n|---|---|---|\n{rows}\n")


def html_text() -> str:
    rows = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in TABLE)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{TITLE}</title><style>p{{color:red}}</style>"
            f"<script>var 菜单 = '脚本内容不应出现';</script></head><body>"
            f"<nav><a href='/'>首页</a><a href='/x'>导航菜单</a></nav><header>页眉广告</header>"
            f"<h1>{CHAPTER_1}</h1><p>{PARAGRAPH_1}</p><h2>{SECTION_1}</h2><div>{PARAGRAPH_2}</div>"
            f"<h1>{CHAPTER_2}</h1><p>{PARAGRAPH_3}</p><table>{rows}</table>"
            f"<footer>版权所有 页脚</footer></body></html>")


def text_gb18030() -> bytes:
    """A legacy GB18030 .txt with chapter lines (and a character outside GBK: 𠀀)."""
    return (f"{CHAPTER_1}\n{PARAGRAPH_1}\n\n{SECTION_1}\n{PARAGRAPH_2}𠀀\n\n{CHAPTER_2}\n{PARAGRAPH_3}\n").encode("gb18030")


def text_utf8_bom() -> bytes:
    return b"\xef\xbb\xbf" + f"{CHAPTER_1}\n{PARAGRAPH_1}\n".encode("utf-8")


def pdf_with_small_subheadings() -> bytes:
    """A PDF whose sub-headings are 13 pt over a 12 pt body (reportlab), each
    followed by its paragraph."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    base = getSampleStyleSheet()
    h1 = ParagraphStyle("h1", parent=base["Heading1"], fontName="STSong-Light", fontSize=18, leading=24)
    sub = ParagraphStyle("sub", parent=base["BodyText"], fontName="STSong-Light", fontSize=13, leading=18)
    body = ParagraphStyle("body", parent=base["BodyText"], fontName="STSong-Light", fontSize=12, leading=17, wordWrap="CJK")
    story = [Paragraph("差旅费用管理办法", h1),
             Paragraph("住宿标准", sub), Paragraph("一线城市每晚住宿费不超过六百元，其他城市不超过四百元。", body),
             Paragraph("交通标准", sub), Paragraph("出差优先乘坐高铁二等座，经批准可乘坐飞机经济舱。", body)]
    out = io.BytesIO()
    SimpleDocTemplate(out, pagesize=A4, title="差旅费用管理办法").build(story)
    return out.getvalue()


def pdf_in_one_font_size(lines: list[str]) -> bytes:
    """A PDF whose every line, headings included, is set in one 12 pt font
    (reportlab): one paragraph per line."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    body = ParagraphStyle("body", parent=getSampleStyleSheet()["BodyText"], fontName="STSong-Light", fontSize=12,
                          leading=17, wordWrap="CJK")
    out = io.BytesIO()
    SimpleDocTemplate(out, pagesize=A4).build([Paragraph(line, body) for line in lines])
    return out.getvalue()


def markdown_with_html_blocks() -> str:
    """Markdown holding a raw <table> and a <div> block among its paragraphs."""
    return ("# 收费标准\n\n普通会员按月收费。\n\n"
            "<table>\n<tr><th>套餐</th><th>月费</th></tr>\n<tr><td>基础版</td><td>30元</td></tr>\n"
            "<tr><td>专业版</td><td>98元</td></tr>\n</table>\n\n"
            "<div class=\"note\">\n退款须在购买后七日内申请。\n</div>\n\n## 其他\n\n发票按月开具。\n")
