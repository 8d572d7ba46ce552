"""Key phrases of chunks and the passage-phrase graph built from them: the
general document graph, for any corpus, with no LLM.

HippoRAG 2 (OSU-NLP-Group/HippoRAG, "From RAG to Memory", 2025) links each
passage to the phrases extracted from it and runs personalised PageRank
seeded by the query's phrases (weight: the phrase's score over the number of
passages holding it) and by the dense hits (``PASSAGE_NODE_WEIGHT`` times
their normalised scores). HippoRAG extracts the phrases with an LLM
(OpenIE); here they are jieba's TF-IDF key phrases restricted to nouns,
names and foreign words (``jieba.analyse.extract_tags`` with ``allowPOS``),
so the graph needs no model and no network.

Pure code: the graph retriever stores what ``chunk_phrases`` returns as
(Chunk)-[:HAS_PHRASE {weight}]->(Phrase) and reads neighbourhoods back for
``phrase_reset``; ``bench/phrase_graph_probe.py`` runs the same functions
over a whole stored corpus.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import jieba.analyse

from services.common.text import STOP_WORDS, normalize, simplified

#: jieba part-of-speech tags kept as phrases: nouns (n), person, place and
#: organisation names (nr, ns, nt), other proper nouns (nz), verbal nouns
#: (vn) and Latin-script words (eng: product names, acronyms, identifiers).
PHRASE_POS = ("n", "nr", "ns", "nt", "nz", "vn", "eng")

#: Key phrases kept per chunk (HippoRAG's OpenIE yields ~10 per passage).
PHRASES_PER_CHUNK = 12


def chunk_phrases(text: str, limit: int = PHRASES_PER_CHUNK) -> list[tuple[str, float]]:
    """The key phrases of one chunk, best first.

    Args:
        text: the chunk's text (heading path included by the caller when it
            should count).
        limit: most phrases returned.

    Returns:
        [(phrase, weight)], phrases lower-cased and NFKC-normalised, of two
        characters or more, no stop word; weight = jieba's TF-IDF score
        over the best one's (1.0 first, in (0, 1]). [] for text without a
        noun.
    """
    if limit <= 0:
        return []
    tags = jieba.analyse.extract_tags(simplified(normalize(text)), topK=limit * 2, withWeight=True, allowPOS=PHRASE_POS)
    picked: list[tuple[str, float]] = []
    seen: set[str] = set()
    for word, score in tags:
        phrase = word.strip().lower()
        if len(phrase) < 2 or phrase in STOP_WORDS or phrase in seen or phrase.isdigit():
            continue
        seen.add(phrase)
        picked.append((phrase, float(score)))
        if len(picked) >= limit:
            break
    if not picked:
        return []
    top = picked[0][1] or 1.0
    return [(p, round(s / top, 4)) for p, s in picked]


def query_phrases(query: str, vocabulary: Iterable[str] | None = None) -> list[str]:
    """The phrases of a query that can seed PageRank: its key phrases as
    ``chunk_phrases`` extracts them (no limit beyond 24), plus, when a
    ``vocabulary`` of stored phrases is given, every jieba search-mode token
    of the query found in it. Distinct, in order of first appearance."""
    found = [p for p, _ in chunk_phrases(query, limit=24)]
    if vocabulary is not None:
        vocab = vocabulary if isinstance(vocabulary, (set, frozenset, dict)) else set(vocabulary)
        for token in jieba.cut_for_search(simplified(normalize(query))):
            token = token.strip().lower()
            if len(token) >= 2 and token not in STOP_WORDS and token in vocab:
                found.append(token)
    return list(dict.fromkeys(found))


def phrase_reset(phrases: Iterable[str], passage_counts: Mapping[str, int],
                 dense_scores: Mapping[str, float], passage_node_weight: float) -> dict[str, float]:
    """The restart vector of HippoRAG 2's PageRank, keyed ``p:<phrase>`` and
    ``c:<chunk id>``.

    Args:
        phrases: the query's phrases; those absent from ``passage_counts``
            (no stored chunk holds them) are skipped.
        passage_counts: {phrase: number of chunks holding it} (> 0).
        dense_scores: {chunk id: retrieval score}; min-max normalised here
            (all equal: 1.0 each).
        passage_node_weight: the passages' share against the phrases
            (HippoRAG 2's ``passage_node_weight``, 0.05).

    Returns:
        {node: weight}: 1 / passage count per phrase, and
        ``passage_node_weight`` x normalised score per chunk (summed
        with nothing: the two kinds are different nodes). Unnormalised.
    """
    reset: dict[str, float] = {}
    for phrase in phrases:
        count = passage_counts.get(phrase, 0)
        if count > 0:
            reset[f"p:{phrase}"] = 1.0 / count
    if dense_scores:
        low, high = min(dense_scores.values()), max(dense_scores.values())
        span = high - low
        for chunk, score in dense_scores.items():
            norm = (score - low) / span if span > 0 else 1.0
            if norm > 0:
                reset[f"c:{chunk}"] = passage_node_weight * norm
    return reset
