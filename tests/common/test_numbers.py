"""Numbers in text (services.common.numbers): ranges of a quantity."""
from __future__ import annotations

import math

import pytest

from services.common.numbers import HALF_OPEN_EPSILON, chinese_to_int, int_to_chinese, quantities, ranges

pytestmark = pytest.mark.unit
INF = math.inf


@pytest.mark.parametrize(("text", "expected"), [
    ("1年至5年 | 10天", [(1, 5, "年")]),
    # read whole, not again as 满10年 or 不满10年; 满 holds its bound, 不满 not (the next row's 满10年 holds it)
    ("满5年不满10年 | 12天 | 可跨年度顺延一次", [(5, 10 - HALF_OPEN_EPSILON, "年")]),
    ("怀孕满32周但不足36周的旅客", [(32, 36 - HALF_OPEN_EPSILON, "周")]),
    ("滿5年未滿10年 | 15日", [(5, 10 - HALF_OPEN_EPSILON, "年")]),  # traditional characters
    ("滿6個月未滿1年 | 3日", [(0.5, 1 - HALF_OPEN_EPSILON, "年")]),  # two units that convert: in the larger
    ("处三年以上十年以下有期徒刑", [(3, 10, "年")]),
    ("年休假（工龄满10年及以上） | 10天", [(10, INF, "年")]),
    ("3天以上由分管副总审批", [(3, INF, "天")]),
    ("14岁以下儿童不得参加", [(-INF, 14, "岁")]),
    ("购买后 14 日内可退换", [(-INF, 14, "天")]),  # 日 and 天 alike
    ("Staff with 1-5 years of service", [(1, 5, "年")]),
    ("5 days or more", [(5, INF, "天")]),
    ("under 3 years", [(-INF, 3, "年")]),
    ("Medium dog (10 to 25 kg) | £28.00", [(10, 25, "kg")]),
    ("25.1–40 kg | £365.00 | £460.00", [(25.1, 40, "kg")]),
    ("Dog 25 kg and over | £21.50", [(25, INF, "kg")]),
    ("Small dog (up to 10 kilograms)", [(-INF, 10, "kg")]),
    ("Children under 12 years old ride free", [(-INF, 12, "岁")]),
    ("10-25公斤 | 28元", [(10, 25, "kg")]),
    ("配送范围3公里以内免运费", [(-INF, 3, "km")]),
    ("10亩以上至30亩 | 5000元 | 10股", [(10, 30, "亩")]),
    ("建筑面积90-144平方米 | 2.2元", [(90, 144, "m2")]),
    ("商铺面积30㎡以上", [(30, INF, "m2")]),  # ㎡ is m2 once NFKC-normalised; CJK right after a unit
    ("3年至5个月", []),  # two units: not one range
    ("第十条 2025年度", []),
])
def test_ranges_of_a_quantity(text, expected):
    assert ranges(text) == [(float(low), float(high), unit) for low, high, unit in expected]


@pytest.mark.parametrize(("text", "expected"), [
    ("I have worked here for 6 years", [(6, "年")]),  # English units compare as the Chinese ones
    ("a 32kg dog, 12 mins, 3 hrs", [(32, "kg"), (12, "分钟"), (3, "小时")]),
    ("32公斤，十三日", [(32, "kg"), (13, "天")]),
    ("a 100 m2 flat, 120平米, 16 m²", [(100, "m2"), (120, "m2"), (16, "m2")]),  # the 2 of m2 is not a number
    ("my son is 9 years old, a 7-year-old, a 3-day pass", [(9, "岁"), (7, "岁"), (3, "天")]),  # an age as 岁 is
    ("5 minimum, 2 dayspring", [(5, ""), (2, "")]),  # a unit is a whole word
])
def test_quantities_carry_their_unit_in_either_language(text, expected):
    assert quantities(text) == [(float(value), unit) for value, unit in expected]


def test_int_to_chinese_writes_numbers_as_statutes_number_their_articles():
    """As the law corpus's labels write them: 第十条, 第一百一十条, 第一千零一十条, 第一千零七十七条."""
    assert [int_to_chinese(n) for n in (10, 15, 105, 110, 210, 1001, 1010, 1077, 1100)] == \
        ["十", "十五", "一百零五", "一百一十", "二百一十", "一千零一", "一千零一十", "一千零七十七", "一千一百"]
    assert all(chinese_to_int(int_to_chinese(n)) == n for n in range(10000))
    with pytest.raises(ValueError):
        int_to_chinese(10000)
