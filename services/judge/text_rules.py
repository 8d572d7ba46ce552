"""Rule scores over texts (question, answer, contexts, reference answer),
without a model. Every function returns a quality score in [0, 1] (higher is
better) or None when the inputs give nothing to measure; the judge then
reports the rule part as not computed.

Text units: Chinese has no spaces, so overlap is measured on character
bigrams of the normalised text (CJK characters, letters and digits; the
usual unit of Chinese ROUGE/F1) and on jieba keywords
(``services.common.text.query_keywords``). The reference (000, section 6)
names these metrics but gives no formulas; the rules below are GraphMesh's
and each docstring states its constants.
"""
from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence

from domains.pack import CitationRules
from services.common.numbers import number_values
from services.common.text import CITATION, normalize, query_keywords, simplified, split_sentences, strip_citations

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:\.\d+)?|[零〇一二三四五六七八九十百千万亿两]{2,}")

#: An answer sentence counts as supported when at least this share of its
#: bigrams occurs in one context (GraphMesh constant).
SUPPORT_THRESHOLD = 0.5
#: Answers up to this many characters are fully concise when there is no
#: reference answer (GraphMesh constant; generation caps at 512 tokens).
CONCISE_CHARS = 400
#: With a reference answer, up to this multiple of its length is fully concise.
CONCISE_REFERENCE_RATIO = 2.0
#: Readable Chinese sentence length, characters (GraphMesh constant).
READABLE_SENTENCE_CHARS = 80


def bigrams(text: str) -> Counter[str]:
    """Multiset of character bigrams of ``text`` after NFKC normalisation,
    lower-casing, and removing punctuation and whitespace; a one-character
    text gives that character."""
    chars = _NON_WORD.sub("", simplified(normalize(strip_citations(text))).lower())
    if len(chars) == 1:
        return Counter(chars)
    return Counter(chars[i : i + 2] for i in range(len(chars) - 1))


def overlap_f1(candidate: str, reference: str) -> float | None:
    """Bigram F1 between ``candidate`` and ``reference`` (multiset overlap);
    None when either has no bigram."""
    a, b = bigrams(candidate), bigrams(reference)
    if not a or not b:
        return None
    common = sum((a & b).values())
    if not common:
        return 0.0
    precision, recall = common / sum(a.values()), common / sum(b.values())
    return 2 * precision * recall / (precision + recall)


def coverage(needles: Sequence[str], haystack: str) -> float | None:
    """Share of ``needles`` (keywords) that occur in ``haystack`` (normalised,
    lower-cased); None when there are no needles."""
    if not needles:
        return None
    text = simplified(normalize(haystack)).lower()  # keywords come simplified (services.common.text.simplified)
    return sum(1 for n in needles if simplified(n) in text) / len(needles)


_LEADING_CITATIONS = re.compile(r"^\s*((?:\[\d+\]\s*)+)")


def cited_sentences(answer: str) -> list[str]:
    """Sentences of ``answer`` with citation marks written after the
    sentence end ("……。[1]", common in Chinese) moved back to the sentence
    they follow."""
    out: list[str] = []
    for sentence in split_sentences(answer):
        match = _LEADING_CITATIONS.match(sentence)
        if match and out:
            out[-1] += match.group(1)
            sentence = sentence[match.end():]
        if sentence:
            out.append(sentence)
    return out


#: The label the gateway puts before an extractive answer (a note to the
#: reader, not a claim): left out of the sentence rules.
EXTRACTIVE_LABEL = re.compile(r"^\s*(?:（抽取式答案[^）]*）|\(Extractive answer[^)]*\))")


def _content_sentences(answer: str) -> list[str]:
    return [s for s in cited_sentences(EXTRACTIVE_LABEL.sub("", answer)) if len(bigrams(s)) >= 2]


def _supported(sentence: str, contexts: Sequence[str]) -> bool:
    grams = bigrams(sentence)
    total = sum(grams.values())
    for context in contexts:
        if sum((grams & bigrams(context)).values()) / total >= SUPPORT_THRESHOLD:
            return True
    return False


def context_recall_text(reference_answer: str, contexts: Sequence[str]) -> float | None:
    """Share of the reference answer's keywords found in the contexts
    (context recall without gold ids); None without reference or contexts."""
    if not reference_answer.strip() or not contexts:
        return None
    return coverage(query_keywords(reference_answer), "\n".join(contexts))


def context_relevancy(question: str, contexts: Sequence[str]) -> float | None:
    """Mean over contexts of the share of question keywords each contains;
    None without contexts or keywords."""
    keywords = query_keywords(question)
    if not contexts or not keywords:
        return None
    return statistics.fmean(coverage(keywords, c) or 0.0 for c in contexts)


def entity_utilisation(question: str, answer: str, contexts: Sequence[str]) -> float | None:
    """Of the question's keywords that the contexts contain (the entities
    retrieval brought in), the share the answer uses; None when no answer or
    no such keyword."""
    if not answer.strip():
        return None
    joined = normalize("\n".join(contexts)).lower()
    entities = [k for k in query_keywords(question) if k in joined]
    return coverage(entities, answer)


def diversity(contexts: Sequence[str]) -> float | None:
    """1 - mean pairwise bigram Jaccard similarity of the contexts; None
    with fewer than two contexts."""
    sets = [set(bigrams(c)) for c in contexts if c.strip()]
    if len(sets) < 2:
        return None
    sims = [len(a & b) / len(a | b) if a | b else 0.0 for i, a in enumerate(sets) for b in sets[i + 1 :]]
    return 1.0 - statistics.fmean(sims)


def source_grounded(answer: str, n_contexts: int) -> float | None:
    """Share of the answer's content sentences that carry at least one
    citation [n] with 1 <= n <= n_contexts (a mark right after a sentence end
    belongs to that sentence); None without an answer."""
    sentences = _content_sentences(answer)
    if not sentences:
        return None
    grounded = sum(1 for s in sentences if any(1 <= int(n) <= n_contexts for n in CITATION.findall(s)))
    return grounded / len(sentences)


def faithfulness(answer: str, contexts: Sequence[str]) -> float | None:
    """Share of the answer's content sentences supported by one context (at
    least SUPPORT_THRESHOLD of the sentence's bigrams occur in it); None
    without an answer or contexts."""
    sentences = _content_sentences(answer)
    if not sentences or not contexts:
        return None
    return sum(1 for s in sentences if _supported(s, contexts)) / len(sentences)


def hallucination(answer: str, contexts: Sequence[str], question: str = "") -> float | None:
    """1 - share of the answer's bigrams found in neither the contexts nor
    the question (1 = nothing unsupported); None without an answer or
    contexts."""
    grams = bigrams(EXTRACTIVE_LABEL.sub("", answer))
    if not grams or not contexts:
        return None
    known = set(bigrams("\n".join(contexts))) | set(bigrams(question))
    total = sum(grams.values())
    unsupported = sum(n for g, n in grams.items() if g not in known)
    return 1.0 - unsupported / total


def numbers(text: str) -> list[str]:
    """Numbers in ``text``: Arabic (with decimals) and runs of two or more
    Chinese numerals."""
    return _NUMBER.findall(normalize(strip_citations(text)))


def factual_consistency(answer: str, reference_answer: str, contexts: Sequence[str]) -> float | None:
    """Share of the numbers in the answer that also occur in the reference
    answer (when given) or else in the contexts; None when the answer states
    no number."""
    found = numbers(answer)
    if not found:
        return None
    source = reference_answer if reference_answer.strip() else "\n".join(contexts)
    if not source.strip():
        return None
    allowed = set(numbers(source))
    return sum(1 for n in found if n in allowed) / len(found)


def articles(text: str, rules: CitationRules | None = None) -> set[tuple[str, int]]:
    """(document group, unit number) of each source ``text`` names under a
    pack's citation ``rules`` (law_zh: "《中华人民共和国专利法》第四十二条"
    -> ("专利法", 42)); empty without rules."""
    return rules.cited_units(text) if rules is not None else set()


def _same_article(a: tuple[str, int], b: tuple[str, int]) -> bool:
    """Same number, and law names compatible (one contains the other, or
    either unnamed)."""
    return a[1] == b[1] and (not a[0] or not b[0] or a[0] in b[0] or b[0] in a[0])


def article_agreement(answer: str, reference_answer: str, cited_labels: Sequence[str] = (),
                      rules: CitationRules | None = None) -> float | None:
    """F1 between the articles the reference cites and those the answer
    names in its text or cites through [n] (``cited_labels``: the labels of
    the sources it cites, "中华人民共和国刑法 第二百六十六条"), as the pack's
    citation ``rules`` read them; None when the reference cites no article
    (always, without rules) or there is no answer."""
    want = articles(reference_answer, rules)
    if not want or not answer.strip():
        return None
    got = articles(answer, rules) | {a for label in cited_labels for a in articles(label, rules)}
    if not got:
        return 0.0
    recall = sum(any(_same_article(w, g) for g in got) for w in want) / len(want)
    precision = sum(any(_same_article(g, w) for w in want) for g in got) / len(got)
    return 0.0 if not recall or not precision else 2 * precision * recall / (precision + recall)


def _claim_numbers(text: str, rules: CitationRules | None = None) -> set[float]:
    """Number values of ``text`` outside the names of sources (law_zh:
    第N条) when the pack has citation ``rules``."""
    text = normalize(strip_citations(text))
    return set(number_values(rules.source_names.sub(" ", text) if rules is not None else text))


def number_agreement(answer: str, reference_answer: str, rules: CitationRules | None = None) -> float | None:
    """F1 between the numbers (values, Arabic or Chinese numerals; article
    numbers left out) of the answer and of the reference; None when neither
    states a number, or without an answer or reference."""
    if not answer.strip() or not reference_answer.strip():
        return None
    a, b = _claim_numbers(answer, rules), _claim_numbers(reference_answer, rules)
    if not a and not b:
        return None
    common = len(a & b)
    return 2 * common / (len(a) + len(b)) if common else 0.0


def _content_chars(text: str) -> str:
    text = EXTRACTIVE_LABEL.sub("", normalize(strip_citations(text)).strip())
    return _NON_WORD.sub("", text.lower())


def rouge_l(candidate: str, reference: str) -> float | None:
    """ROUGE-L F1 over characters of the content (CJK, letters, digits;
    citation marks, punctuation and the extractive label removed); None
    when either is empty. Texts are cut at 1,000 characters each."""
    a, b = _content_chars(candidate)[:1000], _content_chars(reference)[:1000]
    if not a or not b:
        return None
    prev = [0] * (len(b) + 1)
    for ch in a:
        cur = [0]
        for j, other in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if ch == other else max(prev[j], cur[j - 1]))
        prev = cur
    lcs = prev[-1]
    if not lcs:
        return 0.0
    precision, recall = lcs / len(a), lcs / len(b)
    return 2 * precision * recall / (precision + recall)


def reference_parts(answer: str, reference_answer: str, cited_labels: Sequence[str] = (),
                    rules: CitationRules | None = None) -> dict[str, float | None]:
    """The parts of correctness against a reference: "rouge_l" (content),
    "articles" (article agreement) and "numbers" (number agreement), each
    None when it cannot be computed."""
    return {
        "rouge_l": rouge_l(answer, reference_answer) if answer.strip() else None,
        "articles": article_agreement(answer, reference_answer, cited_labels, rules),
        "numbers": number_agreement(answer, reference_answer, rules),
    }


def correctness(answer: str, reference_answer: str, cited_labels: Sequence[str] = (),
                rules: CitationRules | None = None) -> float | None:
    """Correctness against the reference answer, no model: the mean of the
    computable parts of ``reference_parts`` (character ROUGE-L F1 on the
    content, F1 on the articles cited, F1 on the numbers stated); None
    without an answer or a reference."""
    if not answer.strip() or not reference_answer.strip():
        return None
    parts = [v for v in reference_parts(answer, reference_answer, cited_labels, rules).values() if v is not None]
    return statistics.fmean(parts) if parts else None


def completeness(answer: str, reference_answer: str, cited_labels: Sequence[str] = (),
                 rules: CitationRules | None = None) -> float | None:
    """Share of the reference answer's keywords present in the answer,
    averaged with the share of the reference's articles the answer names or
    cites (when it cites any); None without either."""
    if not answer.strip() or not reference_answer.strip():
        return None
    parts = [coverage(query_keywords(reference_answer), answer)]
    want = articles(reference_answer, rules)
    if want:
        got = articles(answer, rules) | {a for label in cited_labels for a in articles(label, rules)}
        parts.append(sum(any(_same_article(w, g) for g in got) for w in want) / len(want))
    parts = [p for p in parts if p is not None]
    return statistics.fmean(parts) if parts else None


def answer_relevancy(question: str, answer: str) -> float | None:
    """Share of the question's keywords present in the answer; None without
    an answer or keywords."""
    if not answer.strip():
        return None
    return coverage(query_keywords(question), answer)


def conciseness(answer: str, reference_answer: str = "") -> float | None:
    """1 when the answer is at most its target length, else target/length.
    Target: CONCISE_REFERENCE_RATIO x the reference length, or CONCISE_CHARS
    without a reference. None without an answer."""
    length = len(strip_citations(answer).strip())
    if not length:
        return None
    target = CONCISE_REFERENCE_RATIO * len(reference_answer.strip()) if reference_answer.strip() else CONCISE_CHARS
    return min(1.0, target / length)


def readability(answer: str) -> float | None:
    """Mean over sentences of min(1, READABLE_SENTENCE_CHARS / length), times
    0.5 when the answer contains markup (code fences, HTML tags or JSON
    braces); None without an answer."""
    sentences = [s.strip() for s in split_sentences(strip_citations(answer)) if s.strip()]
    if not sentences:
        return None
    score = statistics.fmean(min(1.0, READABLE_SENTENCE_CHARS / len(s)) for s in sentences)
    if "```" in answer or re.search(r"</?[a-zA-Z]+>|[{}]", answer):
        score *= 0.5
    return score
