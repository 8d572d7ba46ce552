"""What a legal text says about other articles, parsed without a model.

Pure functions over Chinese statute text (no I/O), used by the graph
retriever to build its document graph at ingestion and to read article
numbers out of queries:

- ``article_key``: "第一百二十条之一" -> "120之1"; the key an article is
  found by within its law.
- ``law_key``: "《中华人民共和国刑法》" -> "刑法"; the key a law is found by.
- ``find_references``: cross-references (本法第X条, 《X法》第X条, 第X条第X款,
  第X条至第Y条, 前条, 前款 ...) with the law they point into.
- ``find_amendments``: amendment instructions (将刑法第X条修改为,
  在刑法第X条后增加一条，作为第X条之一, 删去刑法第X条 ...).
- ``find_definitions``: defined terms (本法所称X，是指…, X是指…, 前款所称X，
  包括…, and the Criminal Law's "…的，是X").
- ``find_offences``: the acts a penal article punishes ("…的，处…有期徒刑").
- ``resolve``: references to article ids through an index, dropping (and
  counting) those that point at no stored article.

Inputs may be full- or half-width: every function NFKC-normalises first,
and spans refer to the normalised text.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from services.common.numbers import chinese_to_int, int_to_chinese

NUM = r"[零〇一二两三四五六七八九十百千万0-9]+"
#: Prefix of PRC law names, usually left out when a law is cited.
LAW_PREFIX = "中华人民共和国"
#: How a law refers to itself.
SELF_NAMES = ("本法", "本条例", "本规定", "本办法", "本决定", "本解释", "本细则", "本规则", "本准则", "本通则", "本条")
#: Articles a range "第X条至第Y条" may expand to; longer ranges are cut.
MAX_RANGE = 30

_ARTICLE = re.compile(rf"第({NUM})条(?:之({NUM}))?")
_PARAGRAPH = re.compile(rf"^第({NUM})款")
_BRACKETED_LAW = re.compile(r"《([^《》]{1,80})》$")
_SELF = re.compile("(" + "|".join(SELF_NAMES) + ")$")
# What may stand between two article numbers of one list: paragraphs, items,
# conjunctions.
_CONNECTOR = re.compile(rf"^(?:第{NUM}[款项]|第?[（(]{NUM}[)）]项|[、，,和及与或]|或者|以及|至|规定)*$")
_RANGE = re.compile(rf"^(?:第{NUM}[款项])*至$")
_PREVIOUS = re.compile(r"前(两|二|三|四|五)?(条|款)")
_VERSION_SUFFIX = re.compile(r"[（(][^（）()]*(?:修正|修订|年)[^（）()]*[)）]$")
_AMENDMENT_LAW = re.compile(r"^(.+?)修正案")
_AMENDING_DECISION = re.compile(r"关于修改《([^《》]+)》")
_QUOTED = re.compile(r"[\"“]")


def normalize(text: str) -> str:
    """NFKC form of ``text`` (full-width letters, digits and punctuation to
    half-width; Chinese characters unchanged)."""
    return unicodedata.normalize("NFKC", text)


def cn_number(text: str) -> int | None:
    """Value of a Chinese or Arabic numeral ("二百零九" -> 209, "十七" -> 17,
    "一千零九十八" -> 1098, "42" -> 42); None when ``text`` is not one. The
    one numeral parser is services.common.numbers.chinese_to_int."""
    if not text:
        return None
    if text.isdigit():
        return int(text)
    return chinese_to_int(text)


def make_article_key(number: int, sub: int | None = None) -> str:
    """The key of article ``number`` (sub-article ``sub`` of 之一/之二)."""
    return f"{number}之{sub}" if sub else str(number)


def article_key(label: str) -> str | None:
    """Key of an article label: "第二百三十四条" -> "234", "第一百二十条之一"
    -> "120之1"; None for labels that are not article numbers ("条目一",
    "全文")."""
    match = _ARTICLE.fullmatch(normalize(label).strip())
    if not match:
        return None
    number = cn_number(match.group(1))
    sub = cn_number(match.group(2)) if match.group(2) else None
    return None if number is None else make_article_key(number, sub)


def law_key(name: str) -> str:
    """Key of a law name: brackets, spaces, the 中华人民共和国 prefix and a
    trailing version note such as "（2018年修正）" removed."""
    key = "".join(normalize(name).split()).strip("《》")
    key = _VERSION_SUFFIX.sub("", key)
    if key.startswith(LAW_PREFIX) and len(key) > len(LAW_PREFIX) + 1:
        key = key[len(LAW_PREFIX):]
    return key


def amended_law(name: str) -> str | None:
    """Key of the law an amending act changes: "中华人民共和国刑法修正案（十一）"
    -> "刑法", "…关于修改《中华人民共和国食品安全法》的决定" -> "食品安全法";
    None for other laws."""
    name = normalize(name)
    decision = _AMENDING_DECISION.search(name)
    if decision:
        return law_key(decision.group(1))
    match = _AMENDMENT_LAW.match(name)
    return law_key(match.group(1)) if match else None


def default_law(name: str) -> str:
    """Key of the law a bare "第X条" in a law's text points into: the amended
    law for an amending act, the law an interpretation names in its title
    ("关于《中华人民共和国刑法》第三十条的解释" -> "刑法"), else the law itself."""
    amended = amended_law(name)
    if amended:
        return amended
    named = re.search(r"关于《([^《》]+)》", normalize(name))
    return law_key(named.group(1)) if named else law_key(name)


@dataclass(frozen=True, slots=True)
class Reference:
    """One article a text points at.

    Attributes:
        law: key of the law named ("刑法"), None for the citing law itself
            (本法, a bare 第X条, 前条).
        hint: for a law named without brackets, the text before the article
            number (the resolver matches known law keys against its end);
            "" otherwise.
        article: article key ("234", "120之1").
        paragraph: 款 number when given.
        kind: "article" (第X条 with 本法 or no law), "named" (《X》第X条 or a
            bare law name), "previous_article" (前条), "previous_paragraph"
            (前款: the citing article itself), "title" (named in a law's title).
        line: 0-based line (paragraph) of the citing text it was found in.
        start / end: character span in the normalised text.
    """

    law: str | None
    article: str
    paragraph: int | None
    kind: str
    line: int
    start: int
    end: int
    hint: str = ""


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos)


def _law_before(prefix: str) -> tuple[str, str | None, str]:
    """(kind, law key, hint) of the law named right before an article number."""
    bracketed = _BRACKETED_LAW.search(prefix)
    if bracketed:
        return "named", law_key(bracketed.group(1)), ""
    if _SELF.search(prefix):
        return "article", None, ""
    tail = re.search(r"[\u4e00-\u9fff]{1,30}$", prefix)
    if tail and re.search(r"(法|法典|条例|规定|办法|决定|解释)$", tail.group(0)):  # 民法典第1077条 (a trial's)
        return "named", None, tail.group(0)
    return "article", None, ""


def find_references(text: str, *, own_article: str | None = None) -> list[Reference]:
    """Cross-references in ``text``, in order.

    A list continues the law of its first item ("《刑法》第三条、第五条" are
    both 刑法); "第X条至第Y条" expands to every article from X to Y (at most
    MAX_RANGE); "第X条第Y款" keeps Y as ``paragraph``. "前条"/"前两条" point
    at the article(s) before ``own_article`` (skipped without it); "前款"
    points at ``own_article`` itself (kind "previous_paragraph"). A bare law
    name (依照刑法第X条) gives ``hint``, not ``law``.

    Args:
        text: article text (any width).
        own_article: article key of the citing article, for 前条/前款.
    """
    text = normalize(text)
    refs: list[Reference] = []
    previous: Reference | None = None
    previous_end = 0
    for match in _ARTICLE.finditer(text):
        number = cn_number(match.group(1))
        sub = cn_number(match.group(2)) if match.group(2) else None
        if number is None:
            continue
        between = text[previous_end:match.start()]
        after = text[match.end():]
        paragraph_match = _PARAGRAPH.match(after)
        paragraph = cn_number(paragraph_match.group(1)) if paragraph_match else None
        line = _line_of(text, match.start())
        if previous is not None and _CONNECTOR.match(between):
            kind, law, hint = previous.kind, previous.law, previous.hint
            if _RANGE.match(between) and sub is None and "之" not in previous.article:
                first = int(previous.article)
                for n in range(first + 1, min(number, first + MAX_RANGE)):
                    refs.append(Reference(law, str(n), None, kind, line, previous.end, match.start(), hint))
        else:
            kind, law, hint = _law_before(text[max(0, match.start() - 40):match.start()])
        ref = Reference(law, make_article_key(number, sub), paragraph, kind, line, match.start(), match.end(), hint)
        refs.append(ref)
        previous, previous_end = ref, match.end() + (paragraph_match.end() if paragraph_match else 0)
    if own_article:
        refs.extend(_previous_refs(text, own_article))
    return refs


def _previous_refs(text: str, own_article: str) -> list[Reference]:
    counts = {None: 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5}
    out = []
    own_number = int(own_article.split("之")[0])
    for match in _PREVIOUS.finditer(text):
        line = _line_of(text, match.start())
        if match.group(2) == "款":
            out.append(Reference(None, own_article, None, "previous_paragraph", line, match.start(), match.end()))
            continue
        if "之" in own_article:  # 第X条之一's previous article is X
            targets = [own_number]
        else:
            targets = [own_number - i for i in range(1, counts[match.group(1)] + 1)]
        out.extend(Reference(None, str(n), None, "previous_article", line, match.start(), match.end())
                   for n in targets if n >= 1)
    return out


def title_references(law_name: str) -> list[Reference]:
    """Articles a law's own title names, e.g. the interpretation "关于《中华人民
    共和国刑法》第二百六十六条的解释" -> 刑法 266 (kind "title")."""
    return [Reference(r.law, r.article, r.paragraph, "title", 0, r.start, r.end, r.hint)
            for r in find_references(law_name) if r.law is not None]


@dataclass(frozen=True, slots=True)
class Amendment:
    """One amendment instruction.

    Attributes:
        law: key of the amended law as named ("刑法"), None when unnamed.
        article: article key the instruction changes or adds.
        action: "replace" (修改为), "add" (增加一条，作为第X条), "delete"
            (删去), "amend" (another change inside the article, e.g. 增加一款).
        paragraph: 款 number when the instruction names one.
        line: 0-based line of the instruction.
    """

    law: str | None
    article: str
    action: str
    paragraph: int | None
    line: int


_ANCHOR = re.compile(rf"(?:第{NUM}款)?(?:之)?后(?:面)?增加")
_INSTRUCTION_END = re.compile(r"[:：]\s*[\"“]|[\"“]")


def split_instruction(text: str) -> tuple[str, str]:
    """(instruction, new text) of an amendment item: the words before the
    first quotation (将刑法第X条修改为：) and the quoted text after it."""
    text = normalize(text)
    match = _INSTRUCTION_END.search(text)
    if not match:
        return text, ""
    return text[:match.start()], text[match.end():]


def find_amendments(text: str, amended: str | None = None) -> list[Amendment]:
    """Amendment instructions in ``text`` (an item of an amending act).

    Only the instruction part is read (before the quoted new text).
    References naming a law (刑法第X条) or none (第X条, within an act that
    amends ``amended``) become amendments; the action is "add" for the
    article named after 作为, "replace" when the instruction says 修改为
    without 中的 (a whole article or paragraph), "delete" for 删去 without
    中的, else "amend".

    Args:
        text: the item's text.
        amended: key of the law the act amends (``amended_law``); used when
            the instruction names no law.
    """
    instruction, _ = split_instruction(text)
    out: list[Amendment] = []
    seen: set[tuple[str, str]] = set()
    partial = "中的" in instruction or "中增加" in instruction or "增加一款" in instruction or "增加两款" in instruction
    for ref in find_references(instruction):
        law = ref.law or _hint_law(ref.hint, amended) or amended
        if amended is not None and law != amended:
            continue
        if _ANCHOR.match(instruction, ref.end):
            continue  # "在第X条后增加一条": X itself is not changed
        before = instruction[max(0, ref.start - 4):ref.start]
        if "作为" in before:
            action = "add"
        elif "删去" in instruction and not partial:
            action = "delete"
        elif "修改为" in instruction and not partial:
            action = "replace"
        else:
            action = "amend"
        if (ref.article, action) in seen:
            continue
        seen.add((ref.article, action))
        out.append(Amendment(law, ref.article, action, ref.paragraph, ref.line))
    return out


def _hint_law(hint: str, amended: str | None) -> str | None:
    if hint and amended and hint.endswith(amended):
        return amended
    return None


@dataclass(frozen=True, slots=True)
class Definition:
    """A term an article defines.

    Attributes:
        term: the defined term ("实用新型", "自首").
        definition: what it is defined as (the sentence's other side).
        kind: "means" (是指), "includes" (包括), "is" (…的，是X / 属于X).
        line: 0-based line it was found in.
    """

    term: str
    definition: str
    kind: str
    line: int


_ENUM_PREFIX = re.compile(rf"^(?:[（(]{NUM}[)）]|{NUM}[、.])\s*")
_DEF_MEANS = re.compile(
    r"^(?:(?:本|前)(?:法|条例|规定|办法|决定|解释|款|条|章|节)[^，。；]{0,30}?所称(?:的)?)?"
    r"[\"“「]?(?P<term>[^，。；：:\"“”」]{1,30}?)[\"”」]?[，,]?(?P<verb>是指|系指|包括)[:：]?(?P<def>.+)$")
_DEF_IS = re.compile(r"^(?P<def>.{4,}?的)[，,](?:是|为|属于)(?P<term>[\u4e00-\u9fff]{2,12})$")
_BAD_TERM = re.compile(r"[，。；、]|^(?:其|该|这|上述|前款|本款|下列)")


def find_definitions(text: str) -> list[Definition]:
    """Terms ``text`` defines, one per sentence at most.

    Patterns (sentence by sentence, a leading "（三）" or "3." dropped):
    "[本法|前款…所称][的]X，是指Y" and "X是指Y" (kind "means"),
    "…所称X，包括Y" (kind "includes"; without 所称 only when X is quoted or
    the sentence starts with it), and "Y的，是X" / "Y的，属于X" (kind "is",
    X of 2-12 Chinese characters, as in the Criminal Law's 自首 and 累犯).
    Terms of one character, or starting with a pronoun (其, 该, 前款), or
    holding punctuation, are skipped.
    """
    text = normalize(text)
    out: list[Definition] = []
    for line_no, line in enumerate(text.split("\n")):
        for sentence in re.split(r"[。；;]", line):
            sentence = _ENUM_PREFIX.sub("", sentence.strip())
            if not sentence:
                continue
            found = _match_definition(sentence)
            if found:
                out.append(Definition(found[0], found[1], found[2], line_no))
    return out


def _match_definition(sentence: str) -> tuple[str, str, str] | None:
    means = _DEF_MEANS.match(sentence)
    if means:
        term = means.group("term").strip().removeprefix("的")
        verb = means.group("verb")
        scoped = "所称" in sentence[:means.start("term") + 1]
        if verb == "包括" and not scoped:
            return None
        if 2 <= len(term) <= 24 and not _BAD_TERM.search(term):
            return term, means.group("def").strip(), "includes" if verb == "包括" else "means"
        return None
    is_match = _DEF_IS.match(sentence)
    if is_match and not _BAD_TERM.search(is_match.group("term")):
        return is_match.group("term"), is_match.group("def"), "is"
    return None


_PENALTY = re.compile(r"有期徒刑|拘役|管制|死刑|罚金|剥夺政治权利|没收财产")
_ACT = re.compile(r"(?:^|[。；\n])\s*(?:[（(]{NUM}[)）])?(?P<act>[^。；\n]{2,160}?)的[，,](?:处|对单位判处|依照|分别依照)"
                  .replace("{NUM}", NUM))


def is_penal(text: str) -> bool:
    """Whether ``text`` prescribes a criminal penalty (有期徒刑, 拘役, 管制,
    死刑, 罚金 …)."""
    return bool(_PENALTY.search(normalize(text)))


def find_offences(text: str) -> list[str]:
    """The acts a penal article punishes, in order: the clause before each
    "…的，处" (or 的，依照/分别依照) of a sentence, leading "有下列情形之一"
    lists and "犯前款罪" repeats skipped. [] when the text prescribes no
    criminal penalty."""
    text = normalize(text)
    if not is_penal(text):
        return []
    acts: list[str] = []
    for match in _ACT.finditer(text):
        act = match.group("act").strip()
        if act.startswith(("犯前款罪", "犯本节", "有前款", "有前两款", "单位犯", "犯前")) or "另有规定" in act or len(act) < 3:
            continue
        if act not in acts:
            acts.append(act)
    return acts


@dataclass(frozen=True, slots=True)
class Resolved:
    """A reference resolved to a stored article."""

    reference: Reference
    document_id: str


def resolve(refs: Iterable[Reference], own_law: str, lookup: Callable[[str, str], str | None],
            known_laws: Iterable[str] = (), own_document: str | None = None) -> tuple[list[Resolved], int]:
    """Resolves references to document ids.

    Args:
        refs: references of one citing text.
        own_law: key of the citing law (for references without a law).
        lookup: (law key, article key) -> document id, None when no such
            article is stored.
        known_laws: law keys a bare law name (``Reference.hint``) may end
            with; the longest that matches wins.
        own_document: the citing document's id; a reference resolving to it
            (前款) is not kept and not counted as dangling.

    Returns:
        (resolved references, deduplicated by target and first occurrence;
        number of dangling references: those naming an article no stored
        document holds, or a law name none of ``known_laws`` matches).
    """
    laws = sorted(set(known_laws), key=len, reverse=True)
    out: list[Resolved] = []
    seen: set[str] = set()
    dangling = 0
    for ref in refs:
        law = ref.law
        if law is None and ref.hint:
            law = next((k for k in laws if ref.hint.endswith(k)), None)
            if law is None:
                dangling += 1
                continue
        target = lookup(law or own_law, ref.article)
        if target is None:
            dangling += 1
            continue
        if target == own_document or target in seen:
            continue
        seen.add(target)
        out.append(Resolved(ref, target))
    return out, dangling


def dict_lookup(index: Mapping[tuple[str, str], str]) -> Callable[[str, str], str | None]:
    """A ``resolve`` lookup over a {(law key, article key): document id} map."""
    return lambda law, article: index.get((law, article))


#: An article number in Arabic numerals, with the number of an article inserted after it: 第26条, 第133条之1.
_ARABIC_ARTICLE = re.compile(r"第\s*(\d{1,4})\s*条(?:之\s*(\d{1,2}))?")


def article_numbers_in_chinese(text: str) -> str:
    """``text`` with each article number written in Arabic numerals (第1077条, 第133条之1) in Chinese numerals
    as the corpus's article labels and texts write it (第一千零七十七条, 第一百三十三条之一), so that the keyword
    and full-text channels match them: asked in Arabic numerals, an article was first for 69 of 100 lookups
    against 95 in Chinese numerals (a paralegal trial's 民法典第1077条 came second, 刑法第133条之一 third)."""
    def chinese(match: re.Match) -> str:
        sub = f"之{int_to_chinese(int(match.group(2)))}" if match.group(2) else ""
        return f"第{int_to_chinese(int(match.group(1)))}条{sub}"

    return _ARABIC_ARTICLE.sub(chinese, text)


def article_mentions(query: str) -> list[Reference]:
    """Articles a query names by number ("刑法第二百三十四条", "《民法典》第
    1165条", "第十条"), in order: ``find_references`` without 前条/前款."""
    return find_references(query)
