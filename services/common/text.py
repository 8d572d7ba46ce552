"""Chinese text utilities shared by ingestion and querying.

Documents and queries must be tokenised the same way for keyword search to
match, so both sides call this module. The user dictionary
(``services.common.lexicon``, path in ``GRAPHMESH_USER_DICT``) is loaded by
each process's entry point (``load_configured_dictionary``), never at import.
"""
from __future__ import annotations

from collections.abc import Sequence

import re
import unicodedata
from functools import lru_cache
from pathlib import Path

import jieba
import opencc

from services.common import lexicon

jieba.setLogLevel(60)

_user_terms: frozenset[str] = frozenset()
_user_digest = ""

# Function words and question words that carry no retrieval signal.
STOP_WORDS = frozenset(
    """
    的 了 和 与 及 或 是 在 有 被 把 对 为 以 将 由 于 从 向 之 其 该 此 这 那 这个 那个 这些 那些
    我 你 他 她 它 我们 你们 他们 自己 本人 某 某某 甲 乙 丙 丁
    吗 呢 吧 啊 呀 么 什么 怎么 怎样 如何 为什么 哪些 哪个 哪里 多少 是否 能否 可以 可否 能 会 应该 应当 需要 要
    一个 一些 没有 不 也 都 就 还 又 而 但 但是 并 并且 如果 因为 所以 因此 等 等等 后 前 时 中 上 下
    请问 问 请 规定 法律 根据 按照 依照 依据 情况 问题 行为 有关 相关 进行
    """.split()
) | frozenset(
    # English function and question words (jieba passes English through as words, lower-cased here)
    """
    a an the is are was were be been being am do does did done has have had having of to in on at by for with from
    as and or but so than then that this these those it its it's what which who whom whose when where why how
    can could should would will shall may might must i me my we our us you your he him his she her they them their
    there here about into onto any some each every please tell
    """.split()
)

_PUNCT_OR_SPACE = re.compile(r"^[\W_]+$", re.UNICODE)
_SENTENCE_END = "。！？!?；;\n"


def normalize(text: str) -> str:
    """Returns ``text`` in NFKC form (full-width to half-width) with runs of
    whitespace collapsed to one space and the ends stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


_CJK_ANY = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u30ff]")


@lru_cache(maxsize=1)
def _t2s() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def simplified(text: str) -> str:
    """``text`` with traditional Chinese characters and phrases written in
    simplified (OpenCC's t2s: 公積金貸款 -> 公积金贷款, 瞭解 -> 了解; simplified
    text is left as it is); text without CJK characters is returned as is.

    Why: the keyword channels, the abstention signals and the extractive
    answer compare words character by character, so a question typed in
    traditional characters matched nothing in simplified documents (a
    trial's hotline set: 公積金貸款可以每個月自動扣公積金還嗎 answerability 0.06
    and refused, 0.91 in simplified). Both sides of every such comparison
    read text through it; stored text and what users see are not changed.
    Text with kana is Japanese and is returned as is. Texts of up to
    SIMPLIFIED_CACHED_CHARS characters are remembered: an extractive answer
    reads the same sentences about 67 times, and the conversions took a
    fifth of its time."""
    return _simplified_cached(text) if len(text) <= SIMPLIFIED_CACHED_CHARS else _simplified(text)


#: Longest text ``simplified`` remembers (a sentence, a chunk; not a whole document being ingested).
SIMPLIFIED_CACHED_CHARS = 2000


def _simplified(text: str) -> str:
    if not _CJK_ANY.search(text) or _KANA.search(text):  # Japanese writes 範, not 范
        return text
    return _t2s().convert(text)


_simplified_cached = lru_cache(maxsize=8192)(_simplified)


@lru_cache(maxsize=1)
def _s2t() -> opencc.OpenCC:
    return opencc.OpenCC("s2tw")


def traditional(text: str) -> bool:
    """Whether ``text`` is written in traditional characters: ``simplified``
    changes it (婚假有幾天？ yes, 婚假有几天？ no, English or Japanese no)."""
    return simplified(text) != text


def in_script_of(question: str, message: str) -> str:
    """``message`` (one of GraphMesh's fixed Chinese texts, written in
    simplified characters) in traditional characters (OpenCC's s2tw) when
    ``question`` is written in them (``traditional``), else as it is: a
    trial's Taiwan users got the extractive label and the refusal in
    simplified characters under their traditional questions."""
    return _s2t().convert(message) if traditional(question) else message


def _is_term(token: str) -> bool:
    return bool(token.strip()) and not _PUNCT_OR_SPACE.match(token)


@lru_cache(maxsize=4096)
def _cut(text: str) -> tuple[str, ...]:
    return tuple(t.lower() for t in jieba.cut_for_search(simplified(normalize(text))) if _is_term(t))


def use_user_dictionary(terms: list[str]) -> str:
    """Adds ``terms`` to jieba so they are cut whole (search mode still adds
    their dictionary sub-words on the document side), and makes
    ``query_keywords`` keep them whole. Replaces earlier calls' terms for
    ``query_keywords`` and the digest; jieba keeps words once added.

    Returns:
        the dictionary digest folded into document content hashes.
    """
    global _user_terms, _user_digest
    for term in terms:
        jieba.add_word(term, freq=lexicon.TERM_FREQ)
    _user_terms = frozenset(t.lower() for t in terms)
    _user_digest = lexicon.digest(terms)
    _cut.cache_clear()
    return _user_digest


def user_dictionary_digest() -> str:
    """Digest of the loaded user dictionary ("" when none)."""
    return _user_digest


#: Folded into the content hash of a document with number terms (ingest.chunking.content_hash).
NUMBER_TERMS_VERSION = "number-terms-1"
#: An Arabic number followed by one CJK character, its classifier or unit: 3号, 5排, 60元, 30天.
_NUMBER_WITH_CLASSIFIER = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s?([\u3400-\u9fff])")


def number_terms(text: str) -> list[str]:
    """Each Arabic number of ``text`` joined to the CJK character after it
    ("3号仓库第5排" -> ["3号", "5排"]; "60 元" -> ["60元"]), in order,
    duplicates kept. jieba cuts them apart, and a lone "3" or "5" matches
    every section number and amount: as one term, 3号仓库 is found by the
    keyword channels where 5号仓库 is not. Added to a chunk's terms
    (``document_terms``) and to the keyword channels' query terms
    (``keyword_terms``), not to ``query_keywords``, whose words other rules
    look up in text."""
    return [number + char for number, char in _NUMBER_WITH_CLASSIFIER.findall(normalize(text))]


#: A number that names rather than measures: 第5排, 第12条, 3号 (an ordinal or a numbered name).
_NUMBERED_NAME = re.compile(r"(?<![\d.])(?:第\s?(\d+)\s?([\u3400-\u9fff])|(\d+)\s?(号))")
#: A level or grade named by a capital letter and a number: P1, L3, S2 (not inside a word or a version).
_LETTER_GRADE = re.compile(r"(?<![A-Za-z0-9._-])([A-Z])(\d{1,2})(?![\w.])")


def numbered_names(text: str) -> list[str]:
    """The ``number_terms`` of ``text`` that name an item ("第5排" -> "5排",
    "3号仓库" -> "3号"), and its grades named by a capital letter and a
    number ("P1 故障" -> "P1"), not a quantity ("满12年", "5天" are not): two
    texts giving different numbers under one such classifier (the
    character after the number, or the letter before it:
    ``numbered_classifier``) are about different items, while different
    quantities may still answer (a range, a threshold)."""
    plain = normalize(text)
    return ([(a or c) + (b or d) for a, b, c, d in _NUMBERED_NAME.findall(plain)]
            + [letter + number for letter, number in _LETTER_GRADE.findall(plain)])


def numbered_classifier(name: str) -> str:
    """What a ``numbered_names`` name counts: its non-digit part ("5排" -> "排", "P1" -> "P")."""
    return "".join(ch for ch in name if not ch.isdigit())


_WEEKDAY = re.compile(r"(?:星期|礼拜)([一二三四五六日天])|周天")


def weekdays_alike(text: str) -> str:
    """``text`` with each weekday written one way, 周一 ... 周日: 星期一, 礼拜一
    and 周一 name the same day (星期天, 礼拜天, 周天: 周日), so a question
    saying 星期一 matches a rule saying 周一 word for word."""
    return _WEEKDAY.sub(lambda m: "周" + ("日" if m.group(1) in (None, "天") else m.group(1)), text)


def keyword_terms(query: str, keywords: Sequence[str]) -> list[str]:
    """The terms the keyword channels rank ``query`` by: its ``keywords``
    (``query_keywords``, expansions included) and then its ``number_terms``
    that are not among them."""
    out = list(keywords)
    out.extend(t for t in dict.fromkeys(number_terms(query)) if t not in out)
    return out


def document_terms(text: str) -> list[str]:
    """Keyword terms of a stored text: jieba search-mode tokens, lower-cased,
    punctuation and whitespace dropped, duplicates kept (term frequency),
    then its ``number_terms``."""
    return list(_cut(text)) + number_terms(text)


def query_keywords(text: str) -> list[str]:
    """Content keywords of a query: search-mode tokens without stop words,
    deduplicated, in first-seen order. A user-dictionary term found in the
    query stays whole: the tokens inside it (三级 of 三级医院) are dropped,
    so they cannot match other text (二三级)."""
    seen: dict[str, None] = {}
    tokens = _cut(text)
    whole = [t for t in tokens if t in _user_terms]
    for term in tokens:
        if term in STOP_WORDS or term in seen:
            continue
        if any(term != w and term in w for w in whole):
            continue
        seen[term] = None
    return list(seen)


_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]")


#: What two wordings of a title may differ in besides words: spaces, punctuation, brackets.
_TITLE_NOISE = re.compile(r"[\W_]+")
#: Characters a title needs before a heading that extends it counts as the same title.
MIN_TITLE_PREFIX = 4


def title_words(text: str) -> int:
    """Characters of ``text`` that are letters or digits (what ``same_title`` compares)."""
    return len(_TITLE_NOISE.sub("", text))


def same_title(heading: str, title: str) -> bool:
    """Whether ``heading`` and ``title`` name the same document: equal, or
    one the other with words added at its end (a PDF's title "服务台常见问题"
    and its first heading "服务台常见问题（FAQ）"), spaces and punctuation
    aside. A shorter one of under MIN_TITLE_PREFIX characters must be equal:
    a title "手册" and a section "手册使用说明" are two headings."""
    a, b = _TITLE_NOISE.sub("", heading.lower()), _TITLE_NOISE.sub("", title.lower())
    if a == b:
        return bool(a)
    shorter, longer = sorted((a, b), key=len)
    return len(shorter) >= MIN_TITLE_PREFIX and longer.startswith(shorter)


def latin_script(text: str) -> bool:
    """Whether ``text`` is written in Latin script: its Latin words outnumber
    its CJK characters ("Where is the 王府井 office?" is; "secret key 轮换之后
    旧的 key 还能用多久？", a Chinese question naming English terms, is not)."""
    words = len(_LATIN_WORD.findall(text))
    return words > 0 and words > len(_CJK_CHAR.findall(text))


def without_cjk(text: str) -> bool:
    """Whether ``text`` has letters and fewer than one CJK character in twenty
    of them (an English document; a Chinese design note full of code is not)."""
    letters = len(_LETTER.findall(text))
    return letters > 0 and 20 * len(_CJK_CHAR.findall(text)) < letters


#: Writing systems of a document (Candidate.script): next to no CJK characters, or some.
LATIN_SCRIPT, CJK_SCRIPT = "latin", "cjk"


def writing_system(text: str) -> str:
    """LATIN_SCRIPT when ``text`` holds next to no CJK characters
    (``without_cjk``: an English document, even with a few Chinese words),
    CJK_SCRIPT when it has letters and more CJK than that (a Chinese
    document, even one full of code), "" when it has no letters at all."""
    if without_cjk(text):
        return LATIN_SCRIPT
    return CJK_SCRIPT if _LETTER.search(text) else ""


def split_sentences(text: str) -> list[str]:
    """Splits ``text`` after each sentence end (。！？!?；; or newline), keeping
    the terminator with its sentence. Concatenating the result gives ``text``."""
    sentences: list[str] = []
    start = 0
    for i, ch in enumerate(text):
        if ch in _SENTENCE_END:
            sentences.append(text[start : i + 1])
            start = i + 1
    if start < len(text):
        sentences.append(text[start:])
    return sentences


#: A citation mark "[n]" of an answer, n the 1-based number of a source in
#: the packed context (group 1: the number).
#: Cells of a table row as the file readers write it ("经理 | 600元/晚 | 450元/晚"), one row a line.
TABLE_CELL_SEPARATOR = " | "


def is_table_row(line: str) -> bool:
    """Whether ``line`` is a table row as the file readers write it."""
    return TABLE_CELL_SEPARATOR in line


def table_headers(lines: Sequence[str]) -> dict[int, int]:
    """{index: index of its table's header row} for the table rows among
    ``lines`` (``is_table_row``): consecutive rows are one table, and its
    first row is the header (a table's header is its own header)."""
    headers: dict[int, int] = {}
    for index, line in enumerate(lines):
        if is_table_row(line):
            headers[index] = headers.get(index - 1, index)
    return headers


CITATION = re.compile(r"\[(\d+)\]")


def citation_numbers(text: str) -> list[int]:
    """Numbers n of the citation marks [n] in ``text``, in order of appearance."""
    return [int(n) for n in CITATION.findall(text)]


def strip_citations(text: str) -> str:
    """``text`` without its citation marks [n]."""
    return CITATION.sub("", text)


TRUNCATION_MARK = "[TRUNCATED]"


def truncate_at_boundary(text: str, max_chars: int, mark: str = TRUNCATION_MARK) -> tuple[str, bool]:
    """Cuts ``text`` to at most ``max_chars`` characters, mark included.

    The cut falls at the last newline or sentence end inside the limit; only
    when there is none does it fall mid-sentence. A cut text ends with
    ``mark`` (MarxSphere appendWithCap: "最接近换行或句号处切断", marked
    [TRUNCATED]).

    Returns:
        (text, truncated). ``("", True)`` when ``max_chars`` cannot hold the mark.
    """
    if len(text) <= max_chars:
        return text, False
    room = max_chars - len(mark)
    if room <= 0:
        return "", True
    head = text[:room]
    cut = max(head.rfind(ch) for ch in _SENTENCE_END)
    if cut > 0:
        head = head[: cut + 1]
    return head + mark, True


def load_configured_dictionary(path: str) -> str:
    """Loads the user dictionary at ``path`` ("" = none: nothing changes).
    A process that cannot read it stops with one line saying so (tokenising
    without it would cut documents and queries differently from its peers).

    Returns:
        the dictionary digest ("" when no path is given).
    Raises:
        SystemExit: the file cannot be read.
    """
    if not path.strip():
        return ""
    location = Path(path.strip()).expanduser()
    try:
        terms = lexicon.read_dictionary(location)
    except (OSError, UnicodeDecodeError) as err:
        raise SystemExit(
            f"error: {lexicon.ENV_PATH}={location}: cannot read the user dictionary "
            f"({type(err).__name__}: {err}); build it with `graphmesh lexicon build`") from None
    return use_user_dictionary(terms)
