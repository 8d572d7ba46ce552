"""The graph retriever's backend runs only the channels a request leaves on:
a switched-off channel makes no query (recording fakes of its two stores);
every part gets the request's scope (collections, metadata conditions)."""
from __future__ import annotations

import pytest

from graphmesh.common.v1 import types_pb2
from services.common import names
from services.common.records import Hit
from services.common.filters import parse_filter
from services.common.retriever import RelatedQuery, RetrievalQuery, SeedRecord
from services.retriever_graph.backend import GraphBackend, GraphBackends
from services.retriever_graph.store import ChunkIndexBuilding

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


class BuildingStore(RecordingStore):
    """A store whose chunk full-text index is still being built."""

    async def retrieve(self, query, keywords, top_k, channels, collections=("default",), conditions=()):
        await super().retrieve(query, keywords, top_k, channels, collections, conditions)
        raise ChunkIndexBuilding("building the chunks' full-text index (40%)")


class OneHitDocs(RecordingDocs):
    async def retrieve(self, query, keywords, top_k, channels, collections=("default",), conditions=()):
        await super().retrieve(query, keywords, top_k, channels, collections, conditions)
        return [Hit("5616#0", "5616", "劳动合同法", ["劳动合同法", "第九条"], "第九条 …", 0, names.GRAPH_ARTICLE, 1.0)]


async def test_an_index_still_building_degrades_its_channels_and_keeps_the_lookups():
    backend = GraphBackend(BuildingStore(), OneHitDocs())
    hits, timings = await backend.retrieve(RetrievalQuery("劳动法第九条", ["劳动法"], [], 10))
    assert [h.chunk_id for h in hits] == ["5616#0"]
    by_stage = {t.stage: t for t in timings}
    assert by_stage["graph.retrieve"].status == types_pb2.STAGE_STATUS_DEGRADED
    assert by_stage["graph.retrieve"].detail == "building the chunks' full-text index (40%)"
    assert by_stage["graph.lookup"].status == types_pb2.STAGE_STATUS_OK


class IndexedStore(RecordingStore):
    def __init__(self, online: bool) -> None:
        super().__init__()
        self.online = online

    async def chunk_index_online(self) -> bool:
        return self.online


class RecordingEntities:
    def __init__(self) -> None:
        self.calls = 0

    async def retrieve_entities(self, query):
        self.calls += 1


@pytest.mark.parametrize("online", [False, True])
async def test_warm_up_runs_the_full_text_channels_only_over_an_index_already_built(online: bool):
    store, docs, entities = IndexedStore(online), RecordingDocs(), RecordingEntities()
    backends = GraphBackends(documents=GraphBackend(store, docs), entities=entities, store=store)
    await backends.warm_up()
    # Without the index the warm-up must not ask for it (it would be built
    # during the first corpus load and kept up to date through it).
    assert store.calls == ([[names.GRAPH_HEADING, names.GRAPH_FULLTEXT, names.GRAPH_NEIGHBOUR]] if online else [])
    assert docs.retrieve_calls and entities.calls == 1


async def test_the_graph_backend_has_no_writing_system_centroids():
    """RetrieverServicer may ask any document backend for centroids (RetrievalBackend.script_centroids); the
    graph emits no pg.centred hits and answers none."""
    assert await GraphBackend(RecordingStore(), RecordingDocs()).script_centroids(["default"]) == {}
