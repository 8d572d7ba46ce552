"""How well a quotable piece of a source answers a question: the score the extractive answer
(services.gateway.answer.extractive) ranks pieces by. Pure functions, tested through the extractive
answer (tests/gateway/answer/test_extractive.py): keyword and character-bigram coverage weighted by
inverse frequency over the candidates (``sentence_score``), bonuses for the number a question asks
and the table row whose range holds the quantity it gives, and which pieces name another item than
the question's (``PieceScorer``)."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping

from services.common.codes import codes_in, names_another_code
from services.common.text import (TABLE_CELL_SEPARATOR, is_table_row, keyword_terms, numbered_classifier, numbered_names,
                                  query_keywords, simplified, weekdays_alike)
from services.gateway.answer.earlier_turns import split_earlier, swapped_subject
from services.gateway.answer.pieces import Candidate
from services.gateway.answer.question_cues import (asked_number, asks_list, asks_steps, condition_quantities,
                                                   excludes_condition, header_unit, holds_condition)
from services.gateway.answer.quotable import NON_WORD, is_item

#: Score factor of a list item or table row against a prose sentence.
ITEM_PENALTY = 0.85
#: Bonus of a sentence holding a number when the question asks an amount.
NUMBER_BONUS = 0.15
#: Bonus of a piece whose range holds a quantity the question gives ("满5年不满10年 | 12天" for 干了6年): as NUMBER_BONUS.
RANGE_BONUS = 0.15
#: Bonus of numbered steps quoted from the first (``Candidate.steps``) in the first source when the question asks
#: how to do something (``asks_steps``): as NUMBER_BONUS. A trial's "Redis 主从切换步骤" was answered from step 3.
STEPS_BONUS = 0.15
#: Bonus of a table row whose key cell the question names whole (``PieceScorer.names_row``: 年卡 in "年卡能冻几次",
#: 体验课 in "私教体验课多少钱"): it picks the row out of rows whose cells only hold the word (半年卡, 两年卡). Two
#: trials' price tables were quoted without the row asked about.
ROW_NAMED_BONUS = 0.3
#: A Chinese character: a key cell names a row only in Chinese.
CJK_CHAR = re.compile(r"[\u3400-\u9fff]")
#: A cell that can name a row: two characters or more, not a number alone.
_NAMING_CELL = re.compile(r"^(?=.*[^\d\s.,:%/-]).{2,}$")
_HAS_NUMBER = re.compile(r"\d|[零一二两三四五六七八九十百千万]+(?:[年月日天个条项次倍元人岁%％]|分之)")


def _bigrams(text: str) -> set[str]:
    """Character bigrams of ``text``'s letters, digits and CJK characters (lower case)."""
    squeezed = NON_WORD.sub("", simplified(text).lower())
    return {squeezed[i:i + 2] for i in range(len(squeezed) - 1)}


def sentence_score(sentence: str, keywords: list[str], question_bigrams: set[str] | None = None,
                   wants_number: bool | re.Pattern = False, idf: dict[str, float] | None = None, item: bool | None = None) -> float:
    """How well ``sentence`` answers, in [0, ~1.15]: the share of the
    question's content keywords it holds (weighted by length in characters
    times ``idf``; half the score when ``question_bigrams`` are given), the
    idf-weighted share of the question's character bigrams it holds (the
    other half: catches words the tokenizer splits differently), plus
    NUMBER_BONUS when the question asks an amount and the sentence states a
    number (``wants_number``: True for any number, or the pattern of the
    numbers that answer, ``asked_number``); list items and table rows count ITEM_PENALTY of that (``item``
    says whether the sentence's line is one; None: judged from the sentence itself). ``idf``
    (term -> weight, 1 when absent) lets words found in every candidate,
    such as the document's title, count less. Weekdays are read alike
    (``weekdays_alike``). 0 without keywords or bigrams."""
    idf = idf or {}
    total = sum(len(k) * idf.get(k, 1.0) for k in keywords)
    text = weekdays_alike(simplified(sentence).lower())
    coverage = sum(len(k) * idf.get(k, 1.0) for k in keywords if k in text) / total if total else 0.0
    if question_bigrams:
        # fsum: exact whatever order the sets iterate in (it follows the hash
        # seed), so equal scores tie the same way in every process
        weight = math.fsum(idf.get(b, 1.0) for b in question_bigrams)
        overlap = math.fsum(idf.get(b, 1.0) for b in _bigrams(weekdays_alike(sentence)) & question_bigrams) / weight if weight else 0.0
        score = 0.5 * coverage + 0.5 * overlap
    else:
        score = coverage
    if score and wants_number and (wants_number.search(simplified(sentence)) if isinstance(wants_number, re.Pattern)
                                   else _HAS_NUMBER.search(sentence)):
        score += NUMBER_BONUS
    if item is None:
        item = is_item(sentence)
    if item:
        score *= ITEM_PENALTY
    return score


def _idf(lines: list[str], terms: set[str]) -> dict[str, float]:
    """Inverse frequency of each of ``terms`` over the candidate ``lines``
    (log((n + 1) / (df + 0.5)), at least 0.1), so that a word every line
    shares (a title, a heading) tells the lines apart less than a rare one."""
    lowered = [weekdays_alike(simplified(line).lower()) for line in lines]
    n = len(lowered)
    return {t: max(0.1, math.log((n + 1) / (sum(t in line for line in lowered) + 0.5))) for t in terms}


class PieceScorer:
    """Scores quotable pieces against one question, the way the extractive
    answer chooses what to quote: ``sentence_score`` with the question's
    content keywords (a keyword inside a longer one dropped), its character
    bigrams, the number bonus when it asks an amount, and the inverse
    frequency of each over all the ``pieces`` given (lists of
    ``quotable_pieces``, one per text).

    Attributes:
        keywords: the question's content keywords ([] without a question).
        pieces: the pieces given, per text.
    """

    def __init__(self, question: str, pieces: list[list[Candidate]], similarity: Mapping[str, float] | None = None,
                 similarity_weight: float = 1.0) -> None:
        earlier, own = split_earlier(question)
        if earlier:  # the turns' words without the label that marks them (上文)
            question = f"{earlier} {own}"
        question = weekdays_alike(simplified(question))  # 星期一 and 礼拜一 as rules write them (周一); a number with its classifier
        # (3号, 5排) counts as one word, so 3号仓库 is not quoted for 5号仓库's line
        keywords = keyword_terms(question, query_keywords(question)) if question else []
        self.keywords = [k for k in keywords if not any(k != o and k in o for o in keywords)]
        # the question itself, not its earlier turns: a follow-up's swapped subject names its row, not the earlier one
        self._question = weekdays_alike(simplified(own)).lower()
        self.pieces = pieces
        self._bigrams = _bigrams(question) if question else set()
        self._wants_number = asked_number(question)
        self._conditions = condition_quantities(question) if question else []
        self._numbered = numbered_names(question) if question else []
        self._codes = codes_in(question) if question else []
        self._asks_steps = asks_steps(question) if question else False
        subject = swapped_subject(own) if earlier else ""
        #: a follow-up's new subject ("孩子" of "那孩子呢？"; its words of two characters or more), and the earlier
        #: turns' words it replaces, whose rows answer the earlier question, not this one
        self.subject = [w for w in {*keyword_terms(subject, query_keywords(subject)), subject} if len(w) >= min(2, len(subject))]
        self._replaced = [k for k in keyword_terms(earlier, query_keywords(earlier))
                          if not any(k in s or s in k for s in self.subject)] if subject else []
        if not asks_list(question):  # a list is quoted whole only when asked for, numbered steps when asked how
            pieces = [[c for c in cs if not c.list_run or (c.steps and self._asks_steps)] for cs in pieces]
            self.pieces = pieces
        else:  # and only when the list is what is asked about, not one of its items
            pieces = [[c for c in cs if not c.list_run or (c.steps and self._asks_steps) or self._about_list(c)]
                      for cs in pieces]
            self.pieces = pieces
        self._first_source = {id(c) for c in pieces[0]} if pieces else set()
        self._key_cell = {id(c): cell for cs in self.pieces for c, cell in _key_cells(cs).items()}
        self._idf = _idf([c.text for cs in pieces for c in cs], set(self.keywords) | self._bigrams)
        self._similarity = {text: similarity_weight * value for text, value in
                            _rescaled(similarity, [c.text for cs in self.pieces for c in cs]).items()} if similarity else {}

    def score(self, candidate: Candidate) -> float:
        """The piece's score, in [0, ~2.3]: ``sentence_score`` (with its header row and RANGE_BONUS when its
        range holds a quantity the question gives, ``question_cues.holds_condition``), plus its dense similarity
        to the question min-max scaled over the pieces (``similarity``) times ``similarity_weight``
        (``cross_script.similarity_weight``: 1 for a question in another script than its sources, where no word
        is shared)."""
        keywords, bigrams = self._row_terms(candidate)
        lexical = sentence_score(candidate.text, keywords, bigrams, self._wants_number, self._idf, candidate.item)
        if self._conditions and holds_condition(_key(candidate), self._conditions):  # a row's subject is in its header
            lexical = sentence_score(f"{candidate.header} {candidate.text}", self.keywords, self._bigrams, self._wants_number,
                                     self._idf, candidate.item)
            lexical += RANGE_BONUS if lexical or self._similarity else 0.0  # across scripts no word is shared
        if lexical and candidate.steps and self._asks_steps and id(candidate) in self._first_source:
            lexical += STEPS_BONUS  # the best source's procedure; a later source's would pad the answer
        if lexical and self.names_row(candidate):
            lexical += ROW_NAMED_BONUS
        return lexical + self.similarity(candidate)

    def names_row(self, candidate: Candidate) -> bool:
        """Whether the piece is a table row whose cell in its table's key column (``_key_cells``; not a number
        alone; in Chinese) the question holds whole: 年卡 of "年卡能冻几次", not S7 of "S7换条胎多少钱", a vehicle
        column's value that many rows share."""
        cell = self._key_cell.get(id(candidate), "")
        # a Chinese cell: English key cells share words with the question's other parts ("free waiting time" in
        # "the demurrage fee after the free waiting time" named the row before the one asked about)
        return bool(cell) and bool(_NAMING_CELL.match(cell)) and bool(CJK_CHAR.search(cell)) and cell in self._question

    def _about_list(self, run: Candidate) -> bool:
        """Whether a list run (lead-in and items, or steps) answers a question asking a list as a whole: its lead-in
        holds a word of the question, or the question's words it holds are spread over more than one item. A
        trial's "主图有什么要求" got the five items of 上架前准备, one of which, on 主图, answers."""
        lines = [simplified(line).lower() for line in run.text.split("\n")]
        held = [k for k in self.keywords if any(k in line for line in lines)]
        if not held or (not run.steps and any(k in lines[0] for k in held)):
            return True
        return not any(all(k in line for k in held) for line in lines)

    def _row_terms(self, candidate: Candidate) -> tuple[list[str], set[str]]:
        """The question's keywords and bigrams that may score ``candidate``: for a table row, not those its header
        names (a column name such as 办公室 is every row's; a trial's "数学老师是谁 办公室在哪" quoted the row whose
        value was 体育馆一楼办公室, not 数学's), unless the row's own first cell holds them."""
        if not (candidate.item and candidate.header):
            return self.keywords, self._bigrams
        header, key = simplified(candidate.header).lower(), simplified(_key(candidate)).lower()
        column_bigrams = _bigrams(header) - _bigrams(key)
        return ([k for k in self.keywords if k not in header or k in key],
                {b for b in self._bigrams if b not in column_bigrams})

    def similarity(self, candidate: Candidate) -> float:
        """The part of the piece's ``score`` that its dense similarity gives (0 without one): the rest is how
        much of the question's words and bigrams it holds. Steps answer as well as their closest step: a long run's
        own vector is diluted (a trial's "listing 被下架怎么办" got steps 2 to 5, step 5 being closest alone)."""
        own = self._similarity.get(candidate.text, 0.0)
        if candidate.steps and self._asks_steps:
            return max([own, *(self._similarity.get(line.strip(), 0.0) for line in candidate.text.split("\n"))])
        return own

    def is_asked_row(self, candidate: Candidate) -> bool:
        """Whether the piece is a row whose range holds a quantity the question gives (``question_cues.holds_condition``),
        or one of whose cells the question names (``names_row``): the row that answers, which other rows of its table
        only crowd ("20kg" got the 10 to 25 kg row and another; 年卡 got 半年卡's row too)."""
        return (bool(self._conditions) and candidate.item and holds_condition(_key(candidate), self._conditions)) \
            or self.names_row(candidate)

    def names_another_number(self, candidate: Candidate) -> bool:
        """Whether the piece names another item than the question under the
        same classifier ("第1排" where it asks "第5排", "5号仓库" where it asks
        "3号仓库", the P3 row where it asks about P1, by ``numbered_names``;
        quantities such as "5天" never conflict, a range may answer them),
        another code of the same shape (``codes.names_another_code``), or, for a
        row, a range that leaves out the quantity the question gives
        (``question_cues.excludes_condition``) or the earlier subject a follow-up swapped for
        another (``names_earlier_subject``)."""
        if self._codes and names_another_code(candidate.text, self._codes):
            return True
        if self._conditions and candidate.item and excludes_condition(_key(candidate), self._conditions):
            return True  # a row whose range leaves out the quantity the question gives: another row's case
        if self._replaced and candidate.item and self.names_earlier_subject(candidate):
            return True
        if not self._numbered:
            return False
        found = numbered_names(candidate.text)
        return any(term not in found and any(numbered_classifier(f) == numbered_classifier(term) for f in found)
                   for term in self._numbered)

    def names_earlier_subject(self, candidate: Candidate) -> bool:
        """Whether the piece's key (a row's first cell, else its text) names a word of the earlier turns that a
        follow-up swapped for its new subject, and not that subject: "退休人员 | 85% | 3万元" for "那孩子呢？" after
        "退休人员门诊报销比例多少"."""
        key = simplified(_key(candidate)).lower()
        return any(k in key for k in self._replaced) and not any(s in key for s in self.subject)

    def finds_subject(self, pieces: list[Candidate]) -> bool:
        """Whether any of ``pieces`` names a follow-up's new subject (True for a question that swaps none)."""
        return not self.subject or any(s in simplified(c.text).lower() for c in pieces for s in self.subject)

    def label_score(self, candidate: Candidate) -> float:
        """The score of the piece's label alone (0 without one): the tie-breaker
        between two pieces that answer as well."""
        if not candidate.label:
            return 0.0
        return sentence_score(candidate.label, self.keywords, self._bigrams, False, self._idf, False)


def _key_cells(pieces: list[Candidate]) -> dict[Candidate, str]:
    """{row piece: its cell in its table's key column, simplified and lower-cased} for the table rows among ``pieces``
    (of one text): the key column is a table's first column whose cells are all filled and all differ (卡种, or 项目
    after a 类别 column of repeated 课包); a table without one has no key cells."""
    tables: dict[int, dict[str, list[str]]] = {}
    for c in pieces:
        if c.item and c.header_at >= 0 and is_table_row(c.text):
            tables.setdefault(c.header_at, {})[c.text] = [simplified(x).strip().lower()
                                                          for x in c.text.split(TABLE_CELL_SEPARATOR)]
    keys: dict[int, int] = {}
    for at, rows in tables.items():
        width = min(map(len, rows.values()))
        keys[at] = next((i for i in range(width) if len(rows) >= 2 and all(r[i] for r in rows.values())
                         and len({r[i] for r in rows.values()}) == len(rows)), -1)
    return {c: tables[c.header_at][c.text][keys[c.header_at]] for c in pieces
            if c.header_at in keys and keys[c.header_at] >= 0 and c.text in tables[c.header_at]}


def _key(candidate: Candidate) -> str:
    """What a piece's range is read from: a table row's first cell (its key: "满1年不满3年" of
    "满1年不满3年 | 5天 | 入职满12个月后开始享受", whose note is no range of the row), with the unit its column's
    header names when the cell gives none (``header_unit``: "51-60" under "Age Band" reads 51-60岁), else its text."""
    if not is_table_row(candidate.text):
        return candidate.text
    cell = candidate.text.split(TABLE_CELL_SEPARATOR, 1)[0]
    unit = header_unit(candidate.header.split(TABLE_CELL_SEPARATOR, 1)[0]) if candidate.header else ""
    bare = _BARE_RANGE.match(cell) if unit else None
    return f"{bare.group(1)}{unit}{cell[bare.end(1):]}" if bare else cell


#: A cell that starts with a number or a range of numbers and no unit after it ("51-60", "18-30 (renewal only)").
_BARE_RANGE = re.compile(r"\s*(\d+(?:\.\d+)?(?:\s*[-–~～至到]\s*\d+(?:\.\d+)?)?)(?![\d.]|\s*[^\s(（])")


def _rescaled(similarity: Mapping[str, float], texts: list[str]) -> dict[str, float]:
    """``similarity`` of ``texts`` min-max scaled to [0, 1] over them (0 for a text without one)."""
    known = [similarity[t] for t in texts if t in similarity]
    if not known:
        return {}
    low, high = min(known), max(known)
    return {t: (similarity[t] - low) / (high - low) if high > low else 1.0 for t in texts if t in similarity}
