"""services.gateway.answer.named_codes: codes a question names that no passage found mentions."""
import pytest

from services.gateway.answer.named_codes import codes_not_found, not_found_reason
from tests.fakes import candidate

pytestmark = pytest.mark.unit

MANUAL = [candidate("m#1", "GA-37VSD 换油周期：每 4000 h 更换润滑油。错误代码 E102：排气温度过高。", "pg.keyword", 3.0),
          candidate("m#2", "备件 1622-0655-00 为油过滤器。R134a 充注量 48 kg。", "pg.keyword", 2.0)]


def test_a_code_held_by_a_passage_in_any_spelling_is_found():
    assert codes_not_found("ga37 换油周期", MANUAL) == []  # GA-37VSD holds it
    assert codes_not_found("Ｅ１０２ 怎么处理", MANUAL) == []  # full width
    assert codes_not_found("16220655 00 是什么", MANUAL) == []  # not a code here: spaces split it
    assert codes_not_found("r134a 充注量", MANUAL) == []


def test_a_code_no_passage_holds_is_named_in_the_questions_language():
    assert codes_not_found("GA-75VSD 换油周期", MANUAL) == ["GA-75VSD"]
    assert not_found_reason("GA-75VSD 换油周期", MANUAL) == "找到的资料中没有提到“GA-75VSD”"
    assert not_found_reason("What does error E205 mean?", MANUAL) == 'None of the passages found mentions "E205"'
    assert not_found_reason("E102 怎么处理", MANUAL) is None
    assert not_found_reason("GA-75VSD 换油周期", []) is None  # nothing found is another rule's case


RUNBOOKS = [candidate("r#1", "ledger-svc 连接池满了：先看 Grafana 面板，max_open_conns 默认 200。", "pg.keyword", 3.0),
            candidate("r#2", "Redis 主从切换：执行 SENTINEL failover；告警 LedgerDBPoolExhausted 见上。", "pg.keyword", 2.0)]


def test_identifiers_no_passage_holds_are_named_too():
    """A trial's SRE runbooks: 11 of 12 questions about services, keys and alerts they do not hold were answered
    with another service's steps (settlement-svc got ledger-svc's)."""
    assert codes_not_found("settlement-svc 连接池满了怎么办", RUNBOOKS) == ["settlement-svc"]
    assert codes_not_found("max_retry_count 默认是多少", RUNBOOKS) == ["max_retry_count"]
    assert codes_not_found("HighLatencyP99 告警是什么意思", RUNBOOKS) == ["HighLatencyP99"]
    assert codes_not_found("MongoDB 主从切换怎么做", RUNBOOKS) == ["MongoDB"]
    assert codes_not_found("ledger-svc 的 JVM 堆内存设置多少", RUNBOOKS) == ["JVM"]
    assert codes_not_found("LEDGER-SVC 连接池满了 max_open_conns 调多少", RUNBOOKS) == []  # held, any case
    assert codes_not_found("redis 主从切换步骤", RUNBOOKS) == []
    # a lower-case word in a Chinese question may be pinyin or an everyday word; an English question's
    # hyphenated word is a word (carry-on)
    assert codes_not_found("zuo ditie 怎么去", RUNBOOKS) == []
    assert codes_not_found("What is the carry-on limit?", RUNBOOKS) == []
    assert codes_not_found("What does max_idle_conns do?", RUNBOOKS) == ["max_idle_conns"]


def test_an_english_question_naming_something_no_passage_holds_abstains_by_it():
    """An English trial's "shipping to Canada?" was answered with other countries' rates."""
    rates = [candidate("s#1", "United Kingdom | Royal Mail | £4.99 | 5-9 business days. We ship on Sundays too.", "pg.keyword", 3.0)]
    assert codes_not_found("Do you ship to Canada?", rates) == ["Canada"]
    assert codes_not_found("How long is shipping to the United Kingdom?", rates) == []
    assert codes_not_found("Do you ship on Sundays?", rates) == []  # held
    assert codes_not_found("Refund policy?", rates) == []  # a capital that starts the sentence names nothing
    assert not_found_reason("Are there USB charging points?", rates) == 'None of the passages found mentions "USB"'


def test_a_one_digit_error_code_counts_beside_a_word_for_an_error():
    """A trial's "AF-350 E4 error" was answered with the E1 row of an error table that stops at E3."""
    table = [candidate("t#1", "AF-350 | E1 | 温度传感器故障；E2 | 加热管过热；E3 | 风扇卡住", "pg.keyword", 3.0)]
    assert codes_not_found("AF-350 E4 error", table) == ["E4"]
    assert codes_not_found("机器显示E4是什么意思", table) == ["E4"]
    assert codes_not_found("AF-350 E2 故障怎么处理", table) == []
    assert codes_not_found("P1 要几分钟内响应", table) == []  # no word for an error: P1 is a priority, not a code


def test_a_run_of_capitalised_words_in_a_chinese_question_is_one_name_held_by_any_of_its_words():
    # a trial's "429 Too Many Requests 怎么处理" was refused: 找到的资料中没有提到"Too"、"Many"
    rows = [candidate("d", "42901 | 触发限流（HTTP 429） | 读取 Retry-After 头；单个 app 的 requests 上限见配额表", "pg.keyword", 1.0)]
    assert codes_not_found("429 Too Many Requests 怎么处理", rows) == []
    assert codes_not_found("429 Too Many Requests 和 MongoDB 怎么处理", rows) == ["MongoDB"]
    assert codes_not_found("Service Unavailable 怎么处理", rows) == ["Service Unavailable"]


ACCOUNT_HEALTH = [candidate("a#1", "Account health. Keep the Order Defect Rate under 1 percent; the Late Shipment Rate "
                                   "under 4 percent. A Bill of Lading goes with every sea shipment.", "pg.keyword", 3.0)]


def test_an_acronym_spelt_out_by_capitalised_words_is_held():
    """A trial's "ODR 多少会封号" was refused with the answering passage first ("找到的资料中没有提到“ODR”"), while
    "odr 超过多少会封号" in lower case was answered."""
    assert codes_not_found("ODR 多少会封号", ACCOUNT_HEALTH) == []
    assert codes_not_found("LSR 要控制在多少", ACCOUNT_HEALTH) == []
    assert codes_not_found("海运 BL 谁给", ACCOUNT_HEALTH) == [] and codes_not_found("BOL 谁给", ACCOUNT_HEALTH) == []
    assert codes_not_found("VTR 要多少", ACCOUNT_HEALTH) == ["VTR"]  # spelt out nowhere
    # initials of lower-case words do not count: they line up by chance in any long text
    assert codes_not_found("KPU 是什么", [candidate("k#1", "keep percent under control", "pg.keyword", 1.0)]) == ["KPU"]
