"""Query understanding without gRPC: normalisation, keywords, question type,
and the query's words in the other writing system (services.common.cross_lingual).

The question-type rules follow MarxSphere detectQuestionType() (four types,
the MarxSphere design (docs/references.md) section 1): cue phrases pick a type, and a weak or conflicting
signal downgrades to factual lookup with a lower confidence.
"""
from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import domains

from services.common.cross_lingual import MAX_TRANSLATED_WORDS, Lexicon, other_script
from services.common.text import normalize, simplified
from services.expander.query_cut import weighted_keywords

# Keywords kept of one query (ExpanderSettings.max_keywords).
DEFAULT_MAX_KEYWORDS = 256

CONCEPT = "QUESTION_TYPE_CONCEPT_DEFINITION"
FACTUAL = "QUESTION_TYPE_FACTUAL_LOOKUP"
MULTI_HOP = "QUESTION_TYPE_MULTI_HOP_REASONING"
POLICY = "QUESTION_TYPE_POLICY_EVALUATION"

_CUES: dict[str, tuple[str, ...]] = {
    CONCEPT: ("什么是", "是什么", "定义", "含义", "概念", "指的是", "何谓", "是指"),
    POLICY: ("是否", "能否", "合法", "违法", "责任", "处罚", "赔偿", "权利", "义务", "应否", "可否", "如何处理", "怎么办", "判决"),
    MULTI_HOP: ("为什么", "原因", "影响", "关系", "区别", "比较", "导致", "之间"),
}


@dataclass(slots=True)
class QueryAnalysis:
    """What the expander makes of a query."""

    normalized_query: str
    keywords: list[str]
    question_type: str
    confidence: float
    expansions: list[tuple[str, str]] = field(default_factory=list)
    keywords_found: int = 0
    translated_script: str = ""
    translated_words: list[tuple[str, list[str], list[str]]] = field(default_factory=list)


def detect_question_type(query: str, domain_packs: Sequence[str] = ()) -> tuple[str, float]:
    """Returns (question type name, confidence in [0, 1]).

    The question classifiers of ``domain_packs`` (the packs of the
    collections searched; law_zh: article lookups, case facts, lay
    consultations) are tried first, in order. Then the general cue rules.
    Downgrade rules: no cue -> factual lookup at 0.5; cues of two types ->
    the type with more cue hits at 0.6 (policy wins ties); one type only ->
    that type at 0.85.
    """
    found = domains.classify(query, domain_packs)
    if found is not None:
        return found
    hits = {kind: sum(cue in query for cue in cues) for kind, cues in _CUES.items()}
    matched = {kind: n for kind, n in hits.items() if n}
    if not matched:
        return FACTUAL, 0.5
    best = max(matched, key=lambda k: (matched[k], k == POLICY))
    return best, 0.85 if len(matched) == 1 else 0.6


#: HTML a user pasted with a question: script and style blocks with what they hold, comments, and the tags of
#: common elements (the text between them is kept). A trial's pasted product page made the code rule refuse
#: over "dataLayer" and "WELCOME10" from its tracking script and banner.
_MARKUP = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>|<!--.*?-->|</?(?:div|span|p|a|br|hr|img|ul|ol|li|table|tr|"
                     r"td|th|thead|tbody|h[1-6]|strong|em|b|i|u|section|article|header|footer|nav|main|label|button|"
                     r"input|form|select|option|textarea|html|head|body|meta|link|title|iframe|code|pre|small|sup|sub|"
                     r"font|center|figure|figcaption|blockquote)\b[^<>]*>", re.IGNORECASE | re.DOTALL)


def without_markup(query: str) -> str:
    """``query`` without the HTML pasted with it (``_MARKUP``), its entities read (&amp; -> &); unchanged when it
    holds none ("x<y" is no markup) or nothing but markup (then the markup is what is asked about)."""
    if "<" not in query:
        return query
    stripped = _MARKUP.sub(" ", query)
    return html.unescape(stripped) if stripped != query and re.search(r"\w", stripped) else query


def analyse(query: str, max_keywords: int = DEFAULT_MAX_KEYWORDS, domain_packs: Sequence[str] = (),
            translate: bool = True) -> QueryAnalysis:
    """Normalises ``query`` (and rewrites it in the notation of ``domain_packs``' corpora: ``domains.rewrite_query``)
    and extracts its keywords (at most
    ``max_keywords``, from the whole text: ``query_cut.weighted_keywords``),
    question type (``detect_question_type`` with ``domain_packs``) and,
    when ``translate``, its words in the other writing system
    (``cross_lingual.Lexicon.concepts``, at most MAX_TRANSLATED_WORDS)."""
    normalized = domains.rewrite_query(simplified(normalize(without_markup(query))), domain_packs)
    keywords, found = weighted_keywords(normalized, max_keywords)
    kind, confidence = detect_question_type(normalized, domain_packs)
    script = other_script(normalized) if translate else ""
    words = Lexicon.load().concepts(normalized, script)[:MAX_TRANSLATED_WORDS] if script else []
    return QueryAnalysis(
        normalized_query=normalized,
        keywords=keywords,
        question_type=kind,
        confidence=confidence,
        expansions=[(k, "keyword") for k in keywords],
        keywords_found=found,
        translated_script=script if words else "",
        translated_words=words,
    )
