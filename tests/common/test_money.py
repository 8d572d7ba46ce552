"""services.common.money: which questions ask a price and which texts state one."""
from __future__ import annotations

import pytest

from services.common.money import asks_price, states_price


@pytest.mark.parametrize("question, asks", [
    ("猫咪打疫苗多少钱", True), ("我爸70岁坐地铁要钱吗", True), ("家庭医生签约要交钱吗", True), ("How much is the no-show fee?", True),
    ("What's the price of a four-week bus ticket?", True), ("合伙人带队办案，一小时收多少钱？", True),
    ("計程車費用是多少", True),  # traditional characters read alike
    ("补贴怎么申请", False),  # names money, asks how
    ("被告人以100元的价格出售给刘某毒品冰毒约0.1克", False),  # a case's facts name a price, ask none
    ("洗牙价格是多少", True), ("一般什么价", True),
    ("计时收费最小按多长时间算？", False),  # asks a duration
    ("How much SO2 goes into the red grapes?", False),
])
def test_a_question_asks_a_price_by_its_words(question, asks):
    assert asks_price(question) is asks


@pytest.mark.parametrize("text, states", [
    ("寄养（狗）每天80元。", True), ("an overweight fee of CNY 200 per bag", True), ("Fee: $25", True),
    ("65周岁以上老年人可免费乘坐市内公交车和地铁。", True),  # free answers 要钱吗
    ("| 人员级别 | 每小时收费（元） |\n| 合伙人 | 2000-3000 |", True),  # a bare range under a price header
    ("项目 | 价格（元）\n狂犬疫苗 | 80 | 每年一针", True),
    ("幼猫满8周龄打第一针猫三联疫苗。", False),
    ("| 级别 | 年假天数 |\n| 满1年 | 5 |", False),  # a number, but no price header
])
def test_a_text_states_a_price_by_currency_header_or_no_charge(text, states):
    assert states_price(text) is states
