"""Citation verification: does source n support the answer sentence that
cites it as [n]? Pure, no model. The gateway runs it on every answer
(services.gateway.answer.generator); the judge and ``graphmesh eval`` use the same
rule to measure citation precision.

A sentence is *supported* by a source when
  1. every number it states (Arabic or Chinese numerals, compared as
     values: 二十 = 20) occurs in the source's label or text, numbers the
     question itself states excepted (restating the question is not a claim),
     and one stated with a unit of measure (13天, 六个月, 二十万元:
     ``numbers.quantities``) occurs there with that unit or bare (a table
     cell), not only as another quantity or a time of day ("13:30" does not
     support "婚假为13天"), and
  2. at least SUPPORT_THRESHOLD of its claim words occur in the source's
     text (its first line, the label with law, chapter and article, does
     not count here: a chapter title such as 专利权的期限、终止和无效 says
     nothing of what the article states; a label segment the sentence
     repeats verbatim, at least MIN_LABEL_SEGMENT_CHARS long, names the
     source and is taken out of the sentence): claim words are the sentence's
     jieba content words (``services.common.text.query_keywords``) that are
     not in the question, weighted by length in characters, after the
     names of sources are taken out when the searched collections' domain
     pack gives citation rules (domains.pack.CitationRules; law_zh: law
     names in 《》, 中华人民共和国, words ending in 法, article references
     第N条): naming the source is checked by its number (rule 1), not
     counted as content. Sub-words of a longer
     claim word are dropped, and when every content word is in the question
     all of them are claim words. A claim word also counts when at least
     half of its character bigrams occur in the source (inflections such as
     "终止" vs "予以终止" and split compounds).
A sentence with no claim word at all (fewer than MIN_CLAIM_CHARS
characters of content) is not checked.

``verify`` checks every sentence that carries [n]: kept when source n
supports it; else re-attributed to the best-supporting other source; else
its mark is removed and it is listed as unsupported. Sentences without a
mark are checked against every source and listed as unsupported when none
supports them (no mark is added). Under a domain pack's citation rules two
more hold, since a rule stated as law is the claim a reader acts on:
  - a sentence that names a group or unit no source holds (law_zh: a law
    such as 《日本刑法》, or an article number not among the sources) is
    removed, marked or not;
  - a sentence that names a source is kept only with the mark of a source
    that supports it: unmarked, it is given that mark; marked, its mark is
    re-attributed to it; when no source supports it, it is removed.
The caller (the gateway's generator) falls back to the extractive answer
when nothing supported is left.

Relevance as well as support: a kept sentence whose question's content
words occur in neither it nor its source (``relevance`` below
RELEVANCE_THRESHOLD) is flagged ``off_topic``; it stays, since its source
does say it, and the flag tells the reader it may not answer.

Constants are GraphMesh's (no reference design gives them): SUPPORT_THRESHOLD
0.5, the judge's SUPPORT_THRESHOLD for faithfulness
(services/judge/text_rules.py), so that a sentence the verifier keeps is one
the judge counts as faithful; bench/answer_quality.py prints precision at
0.4/0.5/0.6 for sensitivity.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from services.common.cross_lingual import Translated, share_held
from services.common.numbers import number_values, quantities
from domains.pack import CitationRules
from services.common.text import CITATION, normalize, query_keywords, simplified, split_sentences

#: Share of a sentence's claim words (by characters) a source must contain.
SUPPORT_THRESHOLD = 0.5
#: Sentences with fewer content characters than this are not checked.
MIN_CLAIM_CHARS = 2
#: A claim word absent verbatim counts when this share of its bigrams occurs.
WORD_BIGRAM_SHARE = 0.5
#: A supported sentence is flagged off-topic when less than this share of
#: the question's content words (by characters) occurs in it or its source:
#: the source says what the sentence says, but neither speaks to the
#: question (GraphMesh's constant; the judge's answer_relevancy is the same
#: coverage over the whole answer). Chosen on the first 80 questions of each
#: law dev set (bench/off_topic_rate.py, docs/answers.md): at 0.05, 1 of
#: the 95 kept sentences citing a gold article was flagged and 104 of the
#: 586 citing another; at 0.1, 10 of the 95 gold ones were.
RELEVANCE_THRESHOLD = 0.05

SUPPORTED, REATTRIBUTED, UNSUPPORTED = "supported", "reattributed", "unsupported"
_LEADING_MARKS = re.compile(r"^\s*((?:\[\d+\]\s*)+)")
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Support:
    """How well one source supports one sentence: ``score`` in [0, 1] (share
    of claim words found; 0 when a number is missing) and the reason when it
    does not reach ``SUPPORT_THRESHOLD``."""

    score: float
    supported: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Check:
    """One checked sentence: its text without marks, the number it cited
    (0 = none), the number after the check (0 = removed or none), the
    outcome (supported / reattributed / unsupported) and the cited source's
    support."""

    sentence: str
    cited: int
    final: int
    outcome: str
    support: float
    reason: str = ""
    relevance: float = 1.0

    @property
    def off_topic(self) -> bool:
        """Kept (supported or re-attributed) but below RELEVANCE_THRESHOLD."""
        return self.outcome != UNSUPPORTED and self.relevance < RELEVANCE_THRESHOLD


@dataclass
class Verification:
    """The answer after verification and every check made.

    Attributes:
        text: the answer with re-attributed marks rewritten and
            unsupported marks removed.
        checks: one Check per (sentence, mark) pair, and one per unmarked
            sentence that no source supports (cited 0, outcome unsupported).
        removed: sentences taken out of the answer (under a pack's citation
            rules: a sentence naming a group or unit no source holds, or
            stating a rule without a citation that no source supports).
    """

    text: str
    checks: list[Check] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def unsupported(self) -> list[Check]:
        """Checks that ended unsupported."""
        return [c for c in self.checks if c.outcome == UNSUPPORTED]

    def precision_before(self) -> float | None:
        """Share of the original marks whose source supported the sentence;
        None when nothing was cited."""
        marked = [c for c in self.checks if c.cited]
        return sum(c.outcome == SUPPORTED for c in marked) / len(marked) if marked else None


def _clean(text: str) -> str:
    # simplified: a claim's words come from query_keywords, which reads traditional characters as simplified; a
    # quote of a traditional source checked against it word for word was "unsupported" (a trial: 57 of 106)
    return _NON_WORD.sub("", simplified(normalize(text)).lower())


def _bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)}


def claim_words(sentence: str, question: str = "", rules: CitationRules | None = None) -> list[str]:
    """Content words of ``sentence`` that are not in ``question`` (all of
    them when every one is), without sub-words of longer words and, under a
    pack's ``rules``, without the names of sources."""
    text = CITATION.sub("", sentence)
    if rules is not None:
        text = rules.source_names.sub("，", text)
    words = [w for w in query_keywords(text)
             if _clean(w) and (rules is None or not rules.source_name_word.fullmatch(w))]
    words = [w for w in words if not any(w != o and w in o for o in words)]
    asked = _clean(question)
    new = [w for w in words if _clean(w) not in asked] if asked else words
    return new or words


def support(sentence: str, source: str, question: str = "", rules: CitationRules | None = None) -> Support:
    """Support of ``sentence`` by ``source`` ("label\ntext": numbers are
    looked up in both, content words in the text; a source without a line
    break is all text); see the module docstring for the rule."""
    body = CITATION.sub("", sentence)
    label, _, text = source.partition("\n")
    haystack = _clean(text if text else label)
    grams = _bigrams(haystack)
    asked = set(number_values(question))
    held = quantities(source)
    for value, unit in quantities(body):
        if value in asked:
            continue
        shown = int(value) if value == int(value) else value
        if not any(v == value for v, _ in held):
            return Support(0.0, False, f"number {shown} not in the source")
        if unit not in ("", "clock") and not any(v == value and u in (unit, "") for v, u in held):
            return Support(0.0, False, f"{shown}{unit} not in the source (only as another quantity)")
    words = claim_words(_without_label_segments(body, label if text else ""), question, rules)
    total = sum(len(_clean(w)) for w in words)
    if total < MIN_CLAIM_CHARS:
        return Support(1.0, True, "nothing to check")
    found = 0
    for word in words:
        w = _clean(word)
        if w in haystack:
            found += len(w)
        elif len(w) > 2:
            wg = _bigrams(w)
            if len(wg & grams) / len(wg) >= WORD_BIGRAM_SHARE:
                found += len(w)
    score = found / total
    if score >= SUPPORT_THRESHOLD:
        return Support(score, True)
    return Support(score, False, f"content words {score:.2f} < {SUPPORT_THRESHOLD:.2f}")


#: A heading segment of a source's label (a chapter or section title) copied
#: into a sentence names the source when it has at least this many characters.
MIN_LABEL_SEGMENT_CHARS = 4


def _without_label_segments(sentence: str, label: str) -> str:
    """``sentence`` with each whitespace-separated segment of ``label`` (law
    name, chapter or section title, article) that it repeats verbatim taken
    out: repeating a heading names the source and is not a claim."""
    for segment in sorted(label.split(), key=len, reverse=True):
        if len(_clean(segment)) >= MIN_LABEL_SEGMENT_CHARS and segment in sentence:
            sentence = sentence.replace(segment, "，")
    return sentence


def marked_sentences(answer: str) -> list[tuple[str, list[int]]]:
    """(sentence, [cited numbers]) for each sentence of ``answer``; marks
    written after the sentence end ("……。[1]") belong to the sentence before."""
    out: list[tuple[str, list[int]]] = []
    for sentence in split_sentences(answer):
        match = _LEADING_MARKS.match(sentence)
        if match and out:
            prev, nums = out[-1]
            out[-1] = (prev + match.group(1), nums + [int(n) for n in CITATION.findall(match.group(1))])
            sentence = sentence[match.end():]
        if sentence:
            out.append((sentence, [int(n) for n in CITATION.findall(sentence)]))
    return out


def verify(answer: str, sources: Sequence[str], question: str = "", skip_prefix: str = "",
           rules: CitationRules | None = None, translation: Sequence[Translated] = ()) -> Verification:
    """Checks every citation of ``answer`` against ``sources`` ([n] is
    ``sources[n-1]``, label and text) and rewrites the marks.

    Args:
        skip_prefix: a leading line left unchecked (the extractive label).
        rules: the citation rules of the searched collections' domain pack
            (domains.citation_rules); None = the general rule.
        translation: the question's words in the other writing system
            (QueryInfo.translation's), read by ``relevance``.
    Returns:
        The Verification: rewritten text and one Check per mark (and per
        unmarked unsupported sentence). Marks outside 1..len(sources) are
        left to the caller's cleaning and not checked.
    """
    head, body = "", answer
    if skip_prefix and answer.startswith(skip_prefix):
        head, body = skip_prefix, answer[len(skip_prefix):]
    checks: list[Check] = []
    pieces: list[str] = []
    removed: list[str] = []
    held = _HeldReferences(sources, rules) if rules is not None else None
    for sentence, cited in marked_sentences(body):
        plain = CITATION.sub("", sentence).strip()
        valid = [n for n in dict.fromkeys(cited) if 1 <= n <= len(sources)]
        if held is not None:
            unheld = held.first_unheld(plain)
            if unheld:
                checks.append(Check(plain, valid[0] if valid else 0, 0, UNSUPPORTED, 0.0,
                                    f"names {unheld}, which no source holds; removed"))
                removed.append(plain)
                continue
        if not valid:
            names_source = held is not None and held.names_a_source(plain)
            if (names_source or not cited) and len(claim_words(plain, question, rules)) and _content_chars(plain) >= MIN_CLAIM_CHARS:
                scored = [(support(plain, s, question, rules), m) for m, s in enumerate(sources, start=1)]
                best = max(scored, key=lambda x: x[0].score, default=(Support(0.0, False), 0))
                if names_source and best[0].supported:
                    # a rule stated without a mark gets the source that supports it
                    checks.append(Check(plain, 0, best[1], REATTRIBUTED, best[0].score, "no citation",
                                        relevance(plain, sources[best[1] - 1], question, translation)))
                    pieces.append(_add_mark(sentence, best[1]))
                    continue
                if not best[0].supported:
                    checks.append(Check(plain, 0, 0, UNSUPPORTED, best[0].score,
                                        "no citation; " + (best[0].reason or "no source")
                                        + ("; states a rule no source supports: removed" if names_source else "")))
                    if names_source:
                        removed.append(plain)
                        continue
            pieces.append(sentence)
            continue
        mapping: dict[int, int] = {}
        for n in valid:
            own = support(plain, sources[n - 1], question, rules)
            if own.supported:
                mapping[n] = n
                checks.append(Check(plain, n, n, SUPPORTED, own.score,
                                    relevance=relevance(plain, sources[n - 1], question, translation)))
                continue
            others = [(support(plain, s, question, rules), m) for m, s in enumerate(sources, start=1) if m != n]
            best = max(others, key=lambda x: x[0].score, default=None)
            if best is not None and best[0].supported:
                mapping[n] = best[1]
                checks.append(Check(plain, n, best[1], REATTRIBUTED, own.score, own.reason,
                                    relevance(plain, sources[best[1] - 1], question, translation)))
            else:
                mapping[n] = 0
                checks.append(Check(plain, n, 0, UNSUPPORTED, own.score, f"source {n}: {own.reason}"))
        if held is not None and not any(mapping.values()) and held.names_a_source(plain):
            # a rule stated as law that none of its marks' sources (nor any other) supports
            for i in range(len(checks) - len(mapping), len(checks)):
                checks[i] = replace(checks[i], reason=checks[i].reason + "; states a rule no source supports: removed")
            removed.append(plain)
            continue
        pieces.append(_rewrite_marks(sentence, mapping))
    return Verification(head + "".join(pieces), checks, removed)


def relevance(sentence: str, source: str, question: str, translation: Sequence[Translated] = ()) -> float:
    """Share in [0, 1] of ``question``'s content words (jieba, of two
    characters or more, sub-words of longer ones dropped, weighted by length
    in characters) found in
    ``sentence`` or ``source``, verbatim or by at least WORD_BIGRAM_SHARE of
    their character bigrams; 1.0 when the question has none. With the
    question's ``translation`` (its words in the other writing system,
    QueryInfo.translation) the share its words hold through their
    translations counts too, the larger of the two: an English question
    answered by a Chinese sentence shares no word with it verbatim."""
    words = [_clean(w) for w in query_keywords(question)]
    words = [w for w in dict.fromkeys(words) if len(w) >= 2 and not any(w != o and w in o for o in words)]
    if not words:
        return 1.0
    across = share_held(sentence + " " + source, translation)
    haystack = _clean(sentence + source)
    grams = _bigrams(haystack)
    found = sum(len(w) for w in words
                if w in haystack or (len(w) > 2 and len(_bigrams(w) & grams) >= WORD_BIGRAM_SHARE * len(_bigrams(w))))
    return max(found / sum(len(w) for w in words), across)


def unheld_references(answer: str, sources: Sequence[str], rules: CitationRules) -> list[str]:
    """The groups and units (law_zh: law names and articles) ``answer``
    names that none of ``sources`` holds, one per sentence that names one,
    in answer order ("日本刑法", "刑法第266条"); [] when every one is held."""
    held = _HeldReferences(sources, rules)
    found = (held.first_unheld(CITATION.sub("", sentence)) for sentence, _ in marked_sentences(answer))
    return [name for name in found if name]


class _HeldReferences:
    """The groups and units (law_zh: laws and articles) the sources name,
    read with a pack's citation rules; answers may name only these."""

    def __init__(self, sources: Sequence[str], rules: CitationRules) -> None:
        self.rules = rules
        self.units: set[tuple[str, int]] = set()
        self.groups: set[str] = set()
        for source in sources:
            self.units |= rules.cited_units(source)
            self.groups |= rules.named_groups(source)
        self.groups |= {group for group, _ in self.units if group}
        self.text = _clean(" ".join(sources))

    def first_unheld(self, sentence: str) -> str:
        """The first group or unit ``sentence`` names that no source holds
        ("日本刑法", "刑法第266条"), "" when every one is held."""
        for group in sorted(self.rules.named_groups(sentence)):
            if group not in self.groups and _clean(group) not in self.text:
                return group
        for group, number in sorted(self.rules.cited_units(sentence)):
            if not any(n == number and (not group or not g or g == group) for g, n in self.units):
                return f"{group}第{number}条" if group else f"第{number}条"
        return ""

    def names_a_source(self, sentence: str) -> bool:
        """Whether ``sentence`` names a group or unit (states what a source says)."""
        return bool(self.rules.source_names.search(sentence) or self.rules.named_groups(sentence))


_TRAILING_PUNCT = re.compile(r"([。！？；!?;.]*\s*)$")


def _add_mark(sentence: str, number: int) -> str:
    """``sentence`` with [number] before its closing punctuation."""
    return _TRAILING_PUNCT.sub(lambda m: f"[{number}]{m.group(1)}", sentence, count=1)


def _content_chars(text: str) -> int:
    return len(_clean(text))


def _rewrite_marks(sentence: str, mapping: dict[int, int]) -> str:
    """``sentence`` with each [n] replaced by [mapping[n]], removed when 0,
    and repeated marks after a rewrite collapsed."""
    seen: set[int] = set()

    def repl(match: re.Match) -> str:
        n = int(match.group(1))
        target = mapping.get(n, n)
        if not target or target in seen:
            return ""
        seen.add(target)
        return f"[{target}]"

    return CITATION.sub(repl, sentence)
