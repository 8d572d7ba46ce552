"""Pure rules of deep iterative retrieval (MetaSearch,
the MetaSearch design (docs/references.md)): the
information growth rate, the stopping rule and the choice of the next
round's sub-queries. Defaults: 3 iterations, 3 sub-queries, stop when
new / known chunk ids < 0.1 (DESIGN.md, from the reference).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_MAX_ITERATIONS = 3
DEFAULT_SUB_QUERIES = 3
DEFAULT_GROWTH_THRESHOLD = 0.1


def growth_rate(new_ids: int, known_ids: int) -> float:
    """New chunk ids / chunk ids known before the iteration; 1.0 when none
    were known (the first iteration), 0.0 when nothing new was found."""
    if known_ids == 0:
        return 1.0 if new_ids else 0.0
    return new_ids / known_ids


@dataclass(slots=True)
class StopDecision:
    """Whether to stop after an iteration, and why."""

    stop: bool
    reason: str


def should_stop(iteration: int, rate: float, max_iterations: int, threshold: float, has_sub_queries: bool = True) -> StopDecision:
    """Stop when the growth rate of iteration >= 2 is below ``threshold``,
    when ``max_iterations`` are done, or when there is nothing to ask next."""
    if iteration >= 2 and rate < threshold:
        return StopDecision(True, f"growth rate {rate:.3f} < {threshold:g}")
    if iteration >= max_iterations:
        return StopDecision(True, f"max iterations {max_iterations}")
    if not has_sub_queries:
        return StopDecision(True, "no sub-queries")
    return StopDecision(False, "")


def next_queries(proposed: Iterable[tuple[str, float]], asked: set[str], k: int) -> list[str]:
    """The ``k`` best-scored proposed sub-queries not asked before."""
    ranked = sorted(proposed, key=lambda p: -p[1])
    out: list[str] = []
    for text, _ in ranked:
        if text not in asked and text not in out:
            out.append(text)
        if len(out) >= k:
            break
    return out


def new_ids(found: Iterable[str], known: Iterable[str]) -> list[str]:
    """Ids in ``found`` (in order, once each) that are not in ``known``."""
    seen = set(known)
    out: list[str] = []
    for cid in found:
        if cid not in seen:
            seen.add(cid)
            out.append(cid)
    return out
