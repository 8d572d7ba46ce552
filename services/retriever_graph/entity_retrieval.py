"""Entity retrieval over the knowledge graph: which channels run for a
query and how their hits combine. Channels:

- graph.exact / graph.alias: the query (and the expander's normalised form)
  looked up by name key; score 1.0 / 0.95.
- graph.resolved: library names the expander proposed (pinyin, shape,
  missing character, fuzzy), looked up exactly; score 0.9 ** rank.
- graph.fulltext: cjk full-text over names and aliases; Lucene score
  divided by the best score of the query (so in (0, 1]).
- graph.attribute: coverage of the listed attribute values (2 or more).
- graph.category: members of the categories the route names.
- graph.expand: weighted expansion from the best direct hits.
"""
from __future__ import annotations

import time
from graphmesh.common.v1 import types_pb2
from services.common.retriever import EntityQuery, timing
from services.retriever_graph.kg_store import EntityHit, KnowledgeGraphStore


async def retrieve_entities(
    store: KnowledgeGraphStore, q: EntityQuery, *, expand_seeds: int = 3, attribute_other_weight: float = 0.3
) -> tuple[list[EntityHit], list[types_pb2.StageTiming]]:
    """Hits of every channel for ``q`` (channel order as in the module doc)."""
    timings = []
    hits: list[EntityHit] = []
    started = time.perf_counter()
    exact = await store.lookup([q.query], q.collections)
    hits += exact
    resolved = []
    if q.resolved_names:
        found = {h.name: h for h in await store.lookup(q.resolved_names, q.collections) if h.channel == "graph.exact"}
        for rank, name in enumerate(q.resolved_names):
            if name in found:
                h = found[name]
                h.channel, h.score, h.matched = "graph.resolved", 0.9 ** rank, name
                resolved.append(h)
        hits += resolved
    timings.append(timing("graph.lookup", started))
    started = time.perf_counter()
    text_hits = await store.fulltext(q.query, q.top_k, q.collections)
    if text_hits:
        top = max(h.score for h in text_hits) or 1.0
        for h in text_hits:
            h.score = h.score / top
    hits += text_hits
    timings.append(timing("graph.fulltext", started))
    if len(q.attribute_values) >= 2:
        started = time.perf_counter()
        hits += await store.attribute_search(q.attribute_values, q.attribute_label, limit=max(q.top_k, 20),
                                             other_weight=attribute_other_weight, collections=q.collections)
        timings.append(timing("graph.attribute", started))
    if q.categories:
        started = time.perf_counter()
        hits += await store.category_members(q.categories, limit=q.top_k, collections=q.collections)
        timings.append(timing("graph.category", started))
    seeds: dict[str, float] = {}
    for h in (exact + resolved)[:expand_seeds] or text_hits[:expand_seeds]:
        seeds.setdefault(h.name, h.score)
    if seeds:
        started = time.perf_counter()
        hits += await store.expand(list(seeds.items()), limit=q.top_k, collections=q.collections)
        timings.append(timing("graph.expand", started))
    return hits, timings
