"""services.common.codes: codes named in text, and spellings read alike."""
import pytest

from services.common.codes import CODE, codes_in, squashed

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, codes", [
    ("GA-75VSD 换油周期", ["GA-75VSD"]), ("E102 怎么处理", ["E102"]), ("A-07 报警", ["A-07"]),
    ("1622-0655-00 是什么配件", ["1622-0655-00"]), ("R134a 充多少", ["R134a"]),
    ("How much did we spend in Q1?", []), ("How much SO2 goes in?", []), ("I land at 11pm", []),
    ("My 8-year-old flies alone", []), ("version 3.2.0 released", []), ("HMAC-SHA256 签名", ["SHA256"]),
    ("SLA for SEV5?", ["SEV5"]), ("sev2 ack time", ["sev2"]), ("who is on call the week of 2026-10-20", ["2026-10-20"]),
    ("connection refused to 10.20.4.17.", ["10.20.4.17"]), ("ping db.internal.lumenfold.io now", ["db.internal.lumenfold.io"]),
    ("Is my carry-on too big? Wi-Fi?", []), ("e.g. the CO2 level", []),
])
def test_what_counts_as_a_code(text, codes):
    assert CODE.findall(text) == codes


def test_codes_are_distinct_in_order_and_read_in_any_width():
    assert codes_in("Ｅ１０２ 和 E102、GA-37VSD") == ["E102", "GA-37VSD"]
    assert squashed("GA-37VSD") == squashed("ga 37 vsd") == "ga37vsd"


def test_a_licence_plate_is_not_a_code():
    """A trial's "浙A12345 做个小保养多少钱" was refused: no document held "A12345", the customer's own plate."""
    from services.common.codes import names_in

    assert codes_in("浙A12345 做个小保养多少钱") == [] and names_in("我车牌粤B·D12345，过年开门不", False) == []
    assert codes_in("浙A12345 的 E102 报警") == ["E102"]  # a code beside the plate still counts
