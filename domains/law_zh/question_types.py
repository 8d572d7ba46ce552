"""The three kinds of legal question the law dev data shows retrieve
differently (docs/retrieval.md, per question type), told apart by their
form before MarxSphere's four cue types are tried:

- article lookup: the query names an article by law and number
  ("刑法第二百三十四条", "《民法典》第1165条是什么") and little else;
- case facts: a judgment's account of a case (被告人, 经审理查明, 公诉机关
  指控, 罪名) - LawBench 3-1's case descriptions;
- lay consultation: a person asking about their own situation in everyday
  words (我, 我家, 怎么办, 可以吗) - LawBench 3-8's consultations.

Each returns a confidence in [0, 1]; the gateway's profiles are keyed by the
type's enum name.
"""
from __future__ import annotations

import re

ARTICLE_LOOKUP = "QUESTION_TYPE_ARTICLE_LOOKUP"
CASE_FACTS = "QUESTION_TYPE_CASE_FACTS"
LAY_CONSULTATION = "QUESTION_TYPE_LAY_CONSULTATION"

_NUM = r"[零〇一二两三四五六七八九十百千万0-9]+"
_ARTICLE = re.compile(rf"(?:《[^《》]{{1,40}}》|[\u4e00-\u9fff]{{1,30}}?(?:法|法典|条例|规定|办法|决定|解释))第{_NUM}条(?:之{_NUM})?")
#: A lookup says little beyond the article: this many characters at most
#: besides the article mentions.
ARTICLE_LOOKUP_MAX_REST = 4
_CASE_CUES = ("被告人", "公诉机关", "经审理查明", "审理查明", "指控", "罪名", "犯罪嫌疑人", "判处", "案发", "归案", "到案",
              "被害人", "供述", "上述事实", "足以认定")
_LAY_CUES = ("我", "咱", "俺", "怎么办", "咋办", "怎么处理", "该怎么", "能不能", "可不可以", "可以吗", "吗？", "吗?", "想问",
             "请问", "老公", "老婆", "孩子", "朋友", "老板", "亲戚")


def detect(query: str) -> tuple[str, float] | None:
    """(question type, confidence) when ``query`` is an article lookup, a
    case description or a lay consultation; None otherwise.

    - Article lookup: an article named with its law, and at most
      ARTICLE_LOOKUP_MAX_REST other characters (punctuation and 是什么/内容
      /规定 words count): 0.95.
    - Case facts: at least two case cues (被告人, 公诉机关, 经审理查明, 罪名
      ...): 0.9; one cue in a text over 300 characters: 0.7.
    - Lay consultation: a first-person or colloquial cue (我, 怎么办, 可以吗
      ...) and no case cue: 0.8 with two or more cues, else 0.65.
    """
    mentions = list(_ARTICLE.finditer(query))
    if mentions:
        rest = _ARTICLE.sub("", query)
        rest = re.sub(r"[\W_]|是什么|什么|内容|规定|讲|说|哪些|的|了|请问|查询|条文", "", rest)
        if len(rest) <= ARTICLE_LOOKUP_MAX_REST:
            return ARTICLE_LOOKUP, 0.95
    case = sum(cue in query for cue in _CASE_CUES)
    if case >= 2:
        return CASE_FACTS, 0.9
    if case == 1 and len(query) > 300:
        return CASE_FACTS, 0.7
    lay = sum(cue in query for cue in _LAY_CUES)
    if lay and not case:
        return LAY_CONSULTATION, 0.8 if lay >= 2 else 0.65
    return None
