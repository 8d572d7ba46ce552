"""Retrieval and answer metrics computable by rule (no model).

Retrieval metrics treat ``ranked`` as a list of ids best first, already
deduplicated, and ``gold`` as the set of relevant ids (binary relevance).
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

from services.common.text import citation_numbers


def dedupe(ids: Sequence[str]) -> list[str]:
    """``ids`` without repeats, first occurrence kept (ranks count distinct ids)."""
    seen: dict[str, None] = {}
    for i in ids:
        seen.setdefault(i, None)
    return list(seen)


def hit_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """1.0 when any gold id is in the top ``k``, else 0.0 (the "Recall@k" of
    the data README: any gold in top k)."""
    return 1.0 if any(r in gold for r in ranked[:k]) else 0.0


def recall_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Fraction of gold ids found in the top ``k`` (0.0 when no gold)."""
    if not gold:
        return 0.0
    return len(gold.intersection(ranked[:k])) / len(gold)


def mrr_at(ranked: Sequence[str], gold: set[str], k: int = 10) -> float:
    """Reciprocal rank of the first gold id within the top ``k``, else 0.0."""
    for position, rid in enumerate(ranked[:k], start=1):
        if rid in gold:
            return 1.0 / position
    return 0.0


def ndcg_at(ranked: Sequence[str], gold: set[str], k: int = 10) -> float:
    """nDCG@k with binary gains: DCG = sum 1/log2(rank+1) over gold hits,
    divided by the DCG of an ideal ranking of min(|gold|, k) gold ids."""
    if not gold:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, rid in enumerate(ranked[:k], start=1) if rid in gold)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gold), k) + 1))
    return dcg / ideal


def first_gold_rank(ranked: Sequence[str], gold: set[str]) -> int | None:
    """1-based rank of the first gold id, None when absent."""
    for position, rid in enumerate(ranked, start=1):
        if rid in gold:
            return position
    return None


def precision_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Fraction of the top ``k`` that is gold (context precision)."""
    top = ranked[:k]
    return sum(r in gold for r in top) / len(top) if top else 0.0


def citation_validity(answer: str, n_sources: int) -> float | None:
    """Share of citations that point at an existing source 1..n_sources;
    None when the answer cites nothing."""
    cited = citation_numbers(answer)
    if not cited:
        return None
    return sum(1 <= n <= n_sources for n in cited) / len(cited)


def citation_f1(answer: str, context_ids: Sequence[str], gold: set[str]) -> float | None:
    """F1 between the ids the answer cites (through their numbers in
    ``context_ids``) and the gold ids; None when nothing is cited or no gold."""
    cited = {context_ids[n - 1] for n in citation_numbers(answer) if 1 <= n <= len(context_ids)}
    if not cited or not gold:
        return None
    tp = len(cited & gold)
    if tp == 0:
        return 0.0
    precision, recall = tp / len(cited), tp / len(gold)
    return 2 * precision * recall / (precision + recall)


_FENCE = re.compile(r"```")


def json_contamination(answer: str) -> float:
    """1.0 when the answer leaks JSON or a code fence (it should be prose),
    else 0.0. Reported inverted as a quality score by the judge."""
    if _FENCE.search(answer):
        return 1.0
    stripped = answer.strip()
    if stripped[:1] in "{[" and stripped[-1:] in "}]":
        try:
            json.loads(stripped)
            return 1.0
        except ValueError:
            return 0.0
    return 0.0
