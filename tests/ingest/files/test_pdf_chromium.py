"""A PDF printed by Chromium (a user's "Save as PDF" of a web page): every glyph placed on its own, some
reported by pypdf at the x of the glyph before, and CJK characters mapped to radicals (⼯ for 工, ⻔ for
门). The file is printed by Debian's chromium at test time (it is too large to keep: Chromium embeds
the font); without chromium the test skips, and under CI=true it fails."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from services.ingest.files import parse_file
from services.ingest.files.pdf import _Run, _advance_stale_starts, unified

pytestmark = pytest.mark.unit

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>body{font-size:16px}h1{font-size:26px}
h2{font-size:20px}</style></head><body><h1>云途物流员工差旅与费用报销制度</h1>
<p>本制度适用于云途物流全体正式员工及试用期员工，自2026年1月1日起施行。</p><h2>一、住宿标准</h2>
<p>员工出差住宿费按城市等级报销：北京、上海、深圳、广州每晚不超过500元；省会城市每晚不超过380元；其他城市每晚不超过280元。部门总监及以上职级标准上浮30%。</p>
<h2>二、交通标准</h2><p>出差优先乘坐高铁二等座。单程4小时以上或夜间22点后出行的，可乘坐飞机经济舱。市内交通实报实销，每天不超过100元。</p>
<h2>三、出差补助</h2><p>出差伙食补助每天100元，按实际出差天数计算，无需提供发票。</p>
</body></html>"""
#: A trial's page (12 pt Noto Sans CJK SC): Latin runs' estimated widths and the spaces Chromium leads words with.
SPEC_PAGE = """<html><head><meta charset="utf-8"><style>body{font-family:"Noto Sans CJK SC",sans-serif;font-size:12pt}
h2{font-size:15pt}</style></head><body><h2>3 验收标准</h2><p>满负荷运行时冷冻水出水温度与设定值偏差不得超过 ±0.5 ℃。</p>
<p>Acceptance report form QF-LS-09 must be signed by the customer and the service engineer.</p></body></html>"""


def _chromium() -> str:
    found = os.environ.get("GRAPHMESH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        reason = "Debian's chromium is not installed (apt-get install -y chromium; `make browser` does it as root)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and the Chromium PDF test cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    return found


def test_a_chromium_pdf_reads_as_its_paragraphs_with_the_characters_written(tmp_path: Path):
    """A trial's Chromium PDF was stored as "省 | 会 | 城 | 市 | 每 | 晚…" with sentences of two lines
    interleaved, and 部⻔, 员⼯ in place of 部门, 员工."""
    page = tmp_path / "page.html"
    page.write_text(PAGE, "utf-8")
    pdf = tmp_path / "page.pdf"
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                    f"--print-to-pdf={pdf}", page.as_uri()], check=True, capture_output=True, timeout=120)
    parsed = parse_file("制度.pdf", "", pdf.read_bytes())
    sections = {s.heading_path[-1]: "\n".join(b.text for b in s.blocks) for s in parsed.sections}
    assert sections["二、交通标准"] == "出差优先乘坐高铁二等座。单程4小时以上或夜间22点后出行的，可乘坐飞机经济舱。" \
                                 "市内交通实报实销，每天不超过100元。"
    assert "省会城市每晚不超过380元；其他城市每晚不超过280元。部门总监及以上职级标准上浮30%。" in sections["一、住宿标准"]
    assert sections["三、出差补助"] == "出差伙食补助每天100元，按实际出差天数计算，无需提供发票。"
    assert not any(" | " in text for text in sections.values())

    # the page has no <title>: Chromium names the PDF after the file (page.html), which is no title
    assert parsed.title == "云途物流员工差旅与费用报销制度"


def _printed(tmp_path: Path, html: str) -> bytes:
    page = tmp_path / "page.html"
    page.write_text(html, "utf-8")
    pdf = tmp_path / "page.pdf"
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                    f"--print-to-pdf={pdf}", page.as_uri()], check=True, capture_output=True, timeout=120)
    return pdf.read_bytes()


def test_a_symbol_after_a_latin_run_stays_in_its_cell_and_a_word_keeps_its_space(tmp_path: Path):
    """Two trials' lines: a Latin run's estimated width made the glyph after it a new cell ("±0.5 | ℃",
    "security@example.com.tw | 。"), and the space Chromium leads a word's run with was dropped ("QF-LS-09must")."""
    text = parse_file("规范.pdf", "", _printed(tmp_path, SPEC_PAGE)).text()
    assert "偏差不得超过±0.5℃。" in text and " | " not in text
    assert "Acceptance report form QF-LS-09 must be signed by the customer and the service engineer." in text


def test_runs_reported_at_the_start_of_the_run_before_are_moved_to_its_end():
    size = 12.0
    line = [_Run("以上", 100.0, 0.0, size), _Run("或", 100.0, 0.0, size), _Run("夜", 136.0, 0.0, size),
            _Run("期未", 148.0, 0.0, size), _Run("提", 160.0, 0.0, size), _Run("交", 184.0, 0.0, size)]
    _advance_stale_starts(line)
    # 或 where 以上 starts: after it; 提 inside 期未 (CJK: one em each, so it is misplaced): after it
    assert [r.x for r in line] == [100.0, 124.0, 136.0, 148.0, 172.0, 184.0]
    latin = [_Run("little", 0.0, 0.0, size), _Run("Price", 30.0, 0.0, size)]  # inside an estimated Latin width
    _advance_stale_starts(latin)
    assert latin[1].x == 30.0  # Latin widths are estimates: left where the PDF puts it


def test_radicals_are_read_as_the_characters_they_stand_for():
    assert unified("部⻔员⼯⽤⻜机伙⻝") == "部门员工用飞机伙食"
    assert unified("客⼾名单") == "客户名单"  # simplified, as Chromium's simplified fonts mean it (the table says 戶)
    assert unified("没有部首的文字。") == "没有部首的文字。"


def test_a_name_wrapped_at_its_hyphen_is_one_word_again():
    """A trial's runbook PDF read "pg- replica-2": the line ended at the name's hyphen."""
    from services.ingest.files.pdf import _join

    assert _join(["Promote the standby pg-", "replica-2 with patronictl."]) == "Promote the standby pg-replica-2 with patronictl."
    assert _join(["a list -", "then text"]) == "a list - then text"  # a dash standing alone is no word's hyphen
    assert _join(["员工请假须提前申请-", "经主管批准"]) == "员工请假须提前申请-经主管批准"
