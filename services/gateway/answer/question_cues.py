"""What a question asks for, by its words (Chinese and English cues): an
amount, and of which kind (a time, a sum of money), or a list. Pure; used
by the extractive answer to choose what to quote (extractive.py)."""
from __future__ import annotations

import re

from services.common import money
from services.common.numbers import quantities, ranges
from services.common.text import simplified

#: Question words asking for an amount, a count or a threshold.
_AMOUNT_CUES = ("多少", "几", "多大", "多长", "多久", "多高", "比例", "比率", "阈值", "权重", "数量", "金额", "费用", "价格",
                "上限", "下限", "得分", "分数", "准确率", "百分之", "期限")
#: The same in English questions (whole words, any case).
_ENGLISH_AMOUNT = re.compile(r"\b(?:how (?:many|much|long|often|old|far|big|large|high|soon)|what (?:percentage|percent|share|"
                             r"rate|fraction)|maximum|minimum|max|min|limit|threshold|at (?:least|most)|number of|"
                             r"price|cost|fee|deadline|amount|quota|weight)\b", re.IGNORECASE)
#: What a question asks a number of, by its words, and the numbers that answer it: a duration or
#: a time (多久, 几天, how long) is answered by a number with a unit of time, a sum of money (多少钱,
#: 费用, how much ... cost) by one with a currency. A number of another kind ("3.2.0", a clause
#: number) does not answer such a question, so only these get NUMBER_BONUS then.
_NUM = money.NUMBER
_UNIT_KINDS = (
    (re.compile(r"多久|多长时间|多长时候|几天|几个?月|几年|几个?小时|几分钟|几周|几点|几号|哪天|什么时候|何时|时长|有效期|"
                r"\bhow (?:long|soon)\b|\bwhen\b|\bhow many (?:days|hours|minutes|weeks|months|years)\b", re.IGNORECASE),
     # "15 个工作日", "10 business days": a count of days may name which days
     re.compile(_NUM + r"\s*(?:秒|分钟|小时|个?钟头|个?(?:工作|自然)?[天日]|号|周|星期|个?月|年|点|时)|\d{1,2}:\d{2}|"
                + _NUM + r"\s*(?:seconds?|minutes?|mins?|hours?|hrs?|(?:business |working |calendar )?days?|weeks?|months?|years?)\b",
                re.IGNORECASE)),
    (re.compile(r"多少钱|几块钱|多少元|金额|费用|价格|价钱|收费|补贴|补助|工资|奖金|奖励|报销|预算|罚款|"
                r"\bhow much\b.*\b(?:cost|costs|spend|spent|pay|paid|charge)\b|\b(?:price|fee|fees|budget|cost)\b", re.IGNORECASE),
     money.STATED),
)


def asked_number(question: str) -> re.Pattern | bool:
    """What counts as a number that answers ``question``: the pattern of a
    number with a unit of the kinds it asks (``_UNIT_KINDS``: time, money),
    True for any number when it asks an amount of another kind
    (``asks_amount``), False when it asks none."""
    kinds = [unit.pattern for cue, unit in _UNIT_KINDS if cue.search(question)]
    if kinds:
        return re.compile("|".join(f"(?:{k})" for k in kinds), re.IGNORECASE)
    return asks_amount(question)


#: Question words asking for a list of things or steps.
_LIST_CUES = ("哪些", "哪几", "步骤", "流程", "包括什么", "有什么", "几步", "依次")
_ENGLISH_LIST = re.compile(r"\b(?:what are the|which (?:ones|are)|list|steps|what steps|what kinds? of)\b", re.IGNORECASE)


def asks_list(question: str) -> bool:
    """Whether ``question`` asks for a list: which things, which steps (Chinese or English cues)."""
    return any(cue in question for cue in _LIST_CUES) or bool(_ENGLISH_LIST.search(question))


#: Question words asking how to do something, step by step.
#: "怎么办" and its colloquial forms too (咋办, 咋整): a trial's "listing 被下架怎么办" was answered from step 2 on.
_STEPS_CUES = re.compile(r"步骤|流程|怎么操作|如何操作|操作方法|怎么做|怎么弄|怎么办|咋办|咋整|咋弄|怎么搞|如何办理|怎么切换|"
                         r"怎么处理|如何处理|怎样处理|"
                         r"\bhow (?:do|can|should) (?:i|we|you)\b|\bhow to\b|\bsteps?\b|\bprocedure\b|\bprocess\b|"
                         r"\bwhat (?:should|do) (?:i|we) do\b", re.IGNORECASE)


def asks_steps(question: str) -> bool:
    """Whether ``question`` asks how to do something (``_STEPS_CUES``: 步骤, 怎么办理, how do I): a procedure's
    steps answer it, in order from the first."""
    return bool(_STEPS_CUES.search(simplified(question)))


def asks_amount(question: str) -> bool:
    """Whether ``question`` asks for an amount, count, period or threshold (Chinese or English cues)."""
    return any(cue in question for cue in _AMOUNT_CUES) or bool(_ENGLISH_AMOUNT.search(question))


#: A condition's quantity in a question ("工作满三年", "孩子8岁", "请假5天"): a unit follows the number. One of a
#: unit ("一天的饭补", "一个月多少钱") is a rate, not a condition, unless 满 comes before it ("满一年").
_ONE_AS_CONDITION = re.compile(r"满\s*(?:1|一)\s*(?:个)?(?:年|月|周|天|日)")


def condition_quantities(question: str) -> list[tuple[float, str]]:
    """The quantities with a unit ``question`` states as a condition (``numbers.quantities``: value, unit
    compared as there), those of one unit left out unless 满 precedes them (a rate: 一天的饭补). A table row
    or rule whose range holds one answers for it (``numbers.ranges``: 满5年不满10年 for 工作了6年)."""
    found = [(value, unit) for value, unit in quantities(question) if unit and unit != "clock"]
    return [(value, unit) for value, unit in found if value != 1 or _ONE_AS_CONDITION.search(simplified(question))]


#: Units that convert exactly into one another, by their size in the smallest of their group: minutes, hours,
#: days and weeks; months and years (a month is not a whole number of days, so days and months do not mix).
_SCALES = ({"分钟": 1, "小时": 60, "天": 1440, "周": 10080}, {"月": 1, "年": 12})


def in_unit(value: float, unit: str, target: str) -> float | None:
    """``value`` of ``unit`` expressed in ``target`` (2 天 is 48 小时), None when the two do not convert."""
    if unit == target:
        return value
    scale = next((group for group in _SCALES if unit in group and target in group), None)
    return None if scale is None else value * scale[unit] / scale[target]


def _comparable(text: str, conditions: list[tuple[float, str]]) -> list[tuple[float, float, float]]:
    """(low, high, the condition's value in the range's unit) for each range of ``text`` (``numbers.ranges``)
    and each of the ``conditions`` whose unit is the range's or converts to it."""
    return [(low, high, converted) for low, high, unit in _ranges_or_point(text) for value, asked in conditions
            if (converted := in_unit(value, asked, unit)) is not None]


#: The longest text read as one point when it states a single quantity: a table row's key ("8月龄", "3年").
POINT_KEY_MAX_CHARS = 12


def _ranges_or_point(text: str) -> list[tuple[float, float, str]]:
    """The ranges of ``text`` (``numbers.ranges``), or, for a short text stating one quantity with a unit and
    no range (a row's key: "8月龄"), that quantity as a range of one point (a trial's 宝宝8个月打什么疫苗
    quoted the 1月龄 and 2月龄 rows of a vaccination table)."""
    found = ranges(text)
    if found or len(text.strip()) > POINT_KEY_MAX_CHARS:
        return found
    points = quantities(text)
    return [(points[0][0], points[0][0], points[0][1])] if len(points) == 1 and points[0][1] not in ("", "clock") else []


#: A table column's header naming what its numbers count, and their unit: an age band (年龄, Age Band) in years
#: of age, a number of days (天数, 旅程日數, days), years of service (工龄, 年資).
_HEADER_UNITS = ((re.compile(r"年龄|岁数|年纪|\bage\b", re.IGNORECASE), "岁"),
                 (re.compile(r"天数|日数|\bdays\b|\bnights\b", re.IGNORECASE), "天"),
                 (re.compile(r"工龄|年资|司龄|服务年限|\byears of service\b", re.IGNORECASE), "年"))


def header_unit(header_cell: str) -> str:
    """The unit of the numbers under a table column headed ``header_cell`` (``_HEADER_UNITS``), "" when it names
    none. A trial's premium table keyed its rows "51-60" under "Age Band": 58歲 got no row of it."""
    header_cell = simplified(header_cell)
    return next((unit for pattern, unit in _HEADER_UNITS if pattern.search(header_cell)), "")


def excludes_condition(text: str, conditions: list[tuple[float, str]]) -> bool:
    """Whether ``text`` states a range of a quantity the ``conditions`` can be
    compared with (the same unit or one it converts to) and none of its
    ranges holds one of them: the 满6个月未满1年 row where the question says
    工作满1年, another row of the same table."""
    comparable = _comparable(text, conditions)
    return bool(comparable) and not any(low <= value <= high for low, high, value in comparable)


def holds_condition(text: str, conditions: list[tuple[float, str]]) -> bool:
    """Whether ``text`` states a range (``numbers.ranges``) holding one of the ``conditions``
    (``condition_quantities``), in the same unit or one it converts to (提前两天 held by "24 to 72 hours")."""
    return any(low <= value <= high for low, high, value in _comparable(text, conditions))
