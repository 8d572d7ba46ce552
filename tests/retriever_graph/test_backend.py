"""The graph retriever's backend runs only the channels a request leaves on:
a switched-off channel makes no query (recording fakes of its two stores);
every part gets the request's scope (collections, metadata conditions)."""
from __future__ import annotations

import pytest

from services.common import names
from services.common.filters import parse_filter
from services.common.retriever import RelatedQuery, RetrievalQuery, SeedRecord
from services.retriever_graph.backend import GraphBackend

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]


class RecordingStore:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.scopes: list[tuple] = []

    async def retrieve(self, query, keywords, top_k, channels, collections=("default",), conditions=()):
        self.calls.append(list(channels))
        self.scopes.append((list(collections), list(conditions)))
        return []


class RecordingDocs:
    def __init__(self) -> None:
        self.retrieve_calls: list[list[str]] = []
        self.related_calls: list[list[str]] = []
        self.scopes: list[tuple] = []

    async def retrieve(self, query, keywords, top_k, channels, collections=("default",), conditions=()):
        self.retrieve_calls.append(list(channels))
        self.scopes.append((list(collections), list(conditions)))
        return []

    async def related(self, query, keywords, seeds, top_k, channels, collections=("default",), conditions=()):
        self.related_calls.append(list(channels))
        self.scopes.append((list(collections), list(conditions)))
        return []


async def test_switched_off_lookup_channel_is_not_run():
    store, docs = RecordingStore(), RecordingDocs()
    backend = GraphBackend(store, docs)
    off = frozenset({names.GRAPH_TERM, names.GRAPH_HEADING, names.GRAPH_FULLTEXT, names.GRAPH_NEIGHBOUR})
    await backend.retrieve(RetrievalQuery("什么是自首", ["自首"], [], 10, disabled=off))
    assert docs.retrieve_calls == [[names.GRAPH_ARTICLE, names.GRAPH_OFFENCE]]
    assert store.calls == []  # heading, full text and neighbours all off: no Neo4j full-text query


async def test_store_channels_run_only_when_on():
    store, docs = RecordingStore(), RecordingDocs()
    backend = GraphBackend(store, docs)
    await backend.retrieve(RetrievalQuery("什么是自首", ["自首"], [], 10, disabled=frozenset({names.GRAPH_NEIGHBOUR})))
    assert store.calls == [[names.GRAPH_HEADING, names.GRAPH_FULLTEXT]]


async def test_related_runs_only_enabled_channels_and_nothing_when_all_off():
    store, docs = RecordingStore(), RecordingDocs()
    backend = GraphBackend(store, docs)
    seeds = [SeedRecord("4777", "4777#0", 1.0)]
    await backend.related(RelatedQuery("自首", ["自首"], seeds, 10, disabled=frozenset({names.GRAPH_PPR})))
    assert docs.related_calls == [[names.GRAPH_CITES, names.GRAPH_VERSION]]
    hits, timings = await backend.related(RelatedQuery("自首", ["自首"], seeds, 10, disabled=frozenset(names.GRAPH_RELATED)))
    assert (hits, timings) == ([], []) and len(docs.related_calls) == 1


async def test_every_part_gets_the_scope():
    store, docs = RecordingStore(), RecordingDocs()
    backend = GraphBackend(store, docs)
    conditions = parse_filter('status = "现行有效"')
    await backend.retrieve(RetrievalQuery("刑法第六十七条", ["自首"], [], 10, collections=["law"], filters=conditions))
    await backend.related(RelatedQuery("自首", ["自首"], [SeedRecord("4777", "4777#0", 1.0)], 10,
                                       collections=["law"], filters=conditions))
    assert store.scopes == [(["law"], conditions)]
    assert docs.scopes == [(["law"], conditions), (["law"], conditions)]
