"""Pure rules of the self-healing fallback chain (MarxSphere
reasonWithFallback, the MarxSphere design (docs/references.md)
section 2): the order of strategies, the
evidence score of a retrieval, and whether it is good enough to answer from.
No gRPC here; services.gateway.answer.fallback_chain runs the strategies.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from graphmesh.common.v1 import types_pb2

STANDARD = "standard"
EXPANDED_QUERY = "expanded_query"
HYDE = "hyde"
ENTITY_NAMES = "entity_names"
FAST_PATH = "fast_path"
# Reference order: standard -> expanded -> HyDE -> query + entity names -> fast path.
ORDER = (STANDARD, EXPANDED_QUERY, HYDE, ENTITY_NAMES, FAST_PATH)
# Strategies that run the full pipeline (graph retriever included).
FULL_PIPELINE = frozenset({STANDARD, EXPANDED_QUERY, HYDE, ENTITY_NAMES})
# Strategies that search with the question as asked: their evidence decides
# abstention (services.gateway.answer.abstention).
AS_ASKED = frozenset({STANDARD, FAST_PATH})
# Retrievers whose failure makes a full-pipeline retrieval unusable: the
# chain then goes straight to the fast path (PostgreSQL only). Not the graph
# retriever: a full-pipeline retrieval without it holds every PostgreSQL
# channel, profile and stage the fast path would, so it answers, with
# "retriever_graph" in its degraded list (a trial's after-sales set: 39 of 45
# answering passages first that way, 36 through the fast path).
REQUIRED_RETRIEVERS = ("retriever_pg",)


def evidence_score(results: Iterable[types_pb2.Candidate], channel: str = "pg.vector") -> float:
    """Best raw score of ``channel`` (cosine similarity for pg.vector) among
    ``results``; 0.0 when no result carries that channel."""
    best = 0.0
    for cand in results:
        for score in cand.channel_scores:
            if score.channel == channel and score.score > best:
                best = score.score
    return best


@dataclass(slots=True)
class Verdict:
    """Whether a strategy's retrieval answers, and why not."""

    accepted: bool
    reason: str


def judge(n_results: int, evidence: float, min_evidence: float, degraded: Iterable[str] = ()) -> Verdict:
    """A retrieval fails when it is empty, when a required retriever was
    degraded (down or timed out), or when its evidence score is below
    ``min_evidence``."""
    down = [d for d in degraded if d in REQUIRED_RETRIEVERS]
    if down:
        return Verdict(False, f"{', '.join(down)} unavailable")
    if n_results == 0:
        return Verdict(False, "empty retrieval")
    if evidence < min_evidence:
        return Verdict(False, f"evidence {evidence:.3f} < {min_evidence:.3f}")
    return Verdict(True, "")


def entity_names_query(query: str, names: Iterable[str], max_names: int = 5, max_chars: int = 300) -> str:
    """The query plus up to ``max_names`` distinct entity names (titles and
    headings seen in earlier retrievals) not already in it."""
    extra: list[str] = []
    for name in names:
        name = name.strip()
        if name and name not in query and name not in extra:
            extra.append(name)
        if len(extra) >= max_names:
            break
    return " ".join([query, *extra])[:max_chars]


def reason_kind(reason: str) -> str:
    """The metrics label of why a strategy was passed over: "timeout",
    "service_down", "empty", "low_evidence" or "other"."""
    for key, kind in (("timed out", "timeout"), ("unavailable", "service_down"), ("UNAVAILABLE", "service_down"),
                      ("DEADLINE_EXCEEDED", "timeout"), ("empty", "empty"), ("evidence", "low_evidence")):
        if key in reason:
            return kind
    return "other"
