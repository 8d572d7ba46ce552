"""The graph retriever's backends over Neo4j, and the async factory that
opens the store and builds them at startup.

Documents (``GraphBackend``): heading lookup, Chinese full text and
reading-order neighbours, and the document graph's channels (article,
term, offence; cites, version, PPR through Related). Entities (``GraphEntityBackend``): the knowledge
graph's lookup, full-text, attribute, category and expansion channels,
category summaries, and the library itself for readers such as the
expander.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphmesh.common.v1 import entity_pb2, types_pb2
from services.common import names
from services.common.records import (Deletion, DocumentRecord, EntityExport, EntityRecord, ExpansionTerm, Hit, IngestFailureRecord,
                                     IngestResult)
from services.common.embed_client import EmbedClient
from services.common.settings import MeshAddresses
from services.common.retriever import EntityQuery, EntityRetrieval, LibrarySnapshot, RelatedQuery, RetrievalQuery, StoreLifecycle, timing
from services.retriever_graph.config import RetrieverGraphSettings
from services.retriever_graph.doc_channels import DocChannels
from services.retriever_graph.entity_retrieval import retrieve_entities
from services.retriever_graph import kg_edit
from services.retriever_graph.kg_store import KnowledgeGraphStore
from services.retriever_graph.store import ChunkIndexBuilding, GraphStore
from services.common.store_deadline import QueryBudget


_STORE_CHANNELS = (names.GRAPH_HEADING, names.GRAPH_FULLTEXT, names.GRAPH_NEIGHBOUR)
_LOOKUP_CHANNELS = (names.GRAPH_ARTICLE, names.GRAPH_TERM, names.GRAPH_OFFENCE)


class GraphBackend(StoreLifecycle):
    """RetrievalBackend over a GraphStore (heading, full-text and neighbour
    channels) and the document graph (DocChannels: article, term and
    offence lookups; cites, version and PPR channels of Related). A channel
    the request switches off is not run; a stage none of whose channels is
    on makes no query."""

    source_by_channel = {channel: types_pb2.SOURCE_GRAPH for channel in names.GRAPH_CHANNELS}

    def __init__(self, store: GraphStore, docs: DocChannels | None = None) -> None:
        self.store = store
        self.docs = docs

    async def retrieve(self, request: RetrievalQuery) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        store_channels = [c for c in _STORE_CHANNELS if request.enabled(c)]
        lookup_channels = [c for c in _LOOKUP_CHANNELS if request.enabled(c)] if self.docs else []
        timings: list[types_pb2.StageTiming] = []

        async def part(source, channels: list[str], stage: str) -> list[Hit]:
            """One half of the channels: the Neo4j store's, or the in-memory lookups'."""
            if not channels:
                return []
            started = time.perf_counter()
            try:
                found = await source.retrieve(request.query, request.keywords, request.top_k, channels,
                                              request.collections, request.filters)
            except ChunkIndexBuilding as building:
                timings.append(timing(stage, started, types_pb2.STAGE_STATUS_DEGRADED, str(building)))
                return []
            timings.append(timing(stage, started))
            return found

        parts = await asyncio.gather(part(self.store, store_channels, "graph.retrieve"),
                                     part(self.docs, lookup_channels, "graph.lookup"))
        return [h for part in parts for h in part], timings

    async def related(self, request: RelatedQuery) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        channels = [c for c in names.GRAPH_RELATED if request.enabled(c)]
        if self.docs is None or not channels:
            return [], []
        started = time.perf_counter()
        hits = await self.docs.related(request.query, request.keywords, request.seeds, request.top_k, channels,
                                       request.collections, request.filters)
        return hits, [timing("graph.related", started)]

    async def ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult:
        return await self.store.ingest_documents(docs)

    async def document_hashes(self, ids: list[str]) -> dict[str, str]:
        return await self.store.document_hashes(ids)

    async def suggest_expansions(self, keywords: list[str], limit: int, collections: list[str]) -> list[ExpansionTerm]:
        raise NotImplementedError("expansion terms come from retriever_pg")

    async def script_centroids(self, collections: list[str]) -> dict[str, Any]:
        """{}: the graph emits no pg.centred hits, so it has no centroids to send."""
        return {}


class GraphEntityBackend:
    """EntityBackend over a KnowledgeGraphStore.

    Args:
        kg: the knowledge-graph store (schema migrated).
        attribute_other_weight: weight of an attribute link whose predicate
            does not match the query's attribute label, in [0, 1].
    """

    def __init__(self, kg: KnowledgeGraphStore, attribute_other_weight: float = 0.3) -> None:
        self.kg = kg
        self.attribute_other_weight = attribute_other_weight

    async def ingest_entities(self, entities: list[EntityRecord], collection: str, replace: bool = False) -> IngestResult:
        rows, failures = [], []
        for i, e in enumerate(entities):
            if not e.name:
                failures.append(IngestFailureRecord(index=i, id="", reason="name must not be blank"))
                continue
            rows.append(e)
        if replace and rows:
            await kg_edit.unlink(self.kg, [r.name for r in rows], collection)
        stored, unchanged = await self.kg.ingest_entities(rows, collection=collection, force=replace) if rows else (0, 0)
        if replace and rows:
            await kg_edit.prune(self.kg, collection)
        return IngestResult(stored=stored, unchanged=unchanged, failures=failures)

    async def export_entities(self, collection: str, names: list[str], page_size: int, after: str,
                              with_links: bool) -> EntityExport:
        return await kg_edit.export(self.kg, collection, names, page_size, after, with_links)

    async def remove_entities(self, collection: str, names: list[str]) -> tuple[Deletion, list[str]]:
        return await kg_edit.delete_entities(self.kg, names, collection)

    async def delete_triples(self, triples: list[tuple[str, str, str]], collection: str) -> int:
        return await kg_edit.delete_triples(self.kg, triples, collection)

    async def ingest_triples(self, triples: list[tuple[str, str, str]], collection: str) -> tuple[int, list[tuple[int, str]]]:
        return await self.kg.ingest_triples(triples, collection=collection)

    async def entity_counts(self) -> dict[str, int]:
        return await self.kg.entity_counts()

    async def delete_entities(self, collection: str) -> Deletion:
        nodes, edges, entities = await self.kg.delete_collection(collection)
        return Deletion(graph_nodes=nodes, graph_edges=edges, entities=entities)

    async def retrieve_entities(self, query: EntityQuery) -> EntityRetrieval:
        hits, timings = await retrieve_entities(self.kg, query, attribute_other_weight=self.attribute_other_weight)
        summaries = []
        if query.categories:
            started = time.perf_counter()
            summaries = [
                entity_pb2.CategorySummary(
                    category=c.category, members=c.members, top_members=c.top_members,
                    shared_facts=[entity_pb2.SharedFact(predicate=p, value=v, members=n) for p, v, n in c.shared_facts])
                for c in await self.kg.category_summaries(query.categories, collections=query.collections)
            ]
            timings.append(timing("graph.category_summary", started))
        return EntityRetrieval(hits, timings, summaries)

    async def entity_library(self, known_version: int | None) -> LibrarySnapshot:
        version = await self.kg.library_version()
        if known_version is not None and known_version == version:
            return LibrarySnapshot(version, None)
        return LibrarySnapshot(version, await self.kg.library_index())


@dataclass
class GraphBackends:
    """What the graph retriever serves from, and how to close it."""

    documents: GraphBackend
    entities: GraphEntityBackend
    store: GraphStore

    async def close(self) -> None:
        """Closes the Neo4j driver and the expander channel."""
        if self.documents.docs is not None and self.documents.docs.embed is not None:
            await self.documents.docs.embed.close()
        await self.store.close()

    async def warm_up(self) -> None:
        """One cheap real query through the document channels (heading,
        full text, neighbours, the lookups) and the entity channels (top_k
        1): the first full-text query of a fresh Neo4j takes seconds (index
        readers, query planning), paid here before health says SERVING.
        The chunks' full-text channels are warmed only when their index is
        online: the warm-up never asks for it to be built (``GraphStore.
        ensure_chunk_index``). Errors of the store propagate (the caller
        retries: ``services.common.server.Readiness``)."""
        off = frozenset() if await self.documents.store.chunk_index_online() else frozenset(_STORE_CHANNELS)
        await self.documents.retrieve(RetrievalQuery(query="预热", keywords=["预热"], embedding=[], top_k=1, disabled=off))
        await self.entities.retrieve_entities(EntityQuery(query="预热", top_k=1))


async def open_backends(settings: RetrieverGraphSettings,
                        expander_addr: str | Callable[[], str] | None = None) -> GraphBackends:
    """Connects to Neo4j, creates constraints and indexes (both schemas),
    loads the document graph's lookup tables and builds both backends (the
    warm-up query runs later: ``GraphBackends.warm_up``). With
    ``settings.dense_lookups`` the lookups get vectors from the expander at
    ``expander_addr`` (an address or a function returning one; default:
    GRAPHMESH_EXPANDER_ADDR).

    Raises:
        neo4j.exceptions.DriverError: Neo4j cannot be reached.
    """
    neo = settings.neo4j
    budget = QueryBudget(read_ceiling=neo.transaction_timeout_max)
    store = GraphStore(neo.uri, neo.user or None, neo.password or None, neo.database,
                       max_retry_seconds=neo.max_retry_seconds, budget=budget,
                       connection_timeout=neo.connection_timeout,
                       connection_acquisition_timeout=neo.connection_acquisition_timeout,
                       liveness_check_timeout=neo.liveness_check_timeout,
                       max_connection_lifetime=neo.max_connection_lifetime)
    await store.open()
    try:
        await store.migrate()
        kg = KnowledgeGraphStore(store.driver, neo.database, settings.expansion_weights, budget=budget)
        await kg.migrate()
        embed = (EmbedClient(expander_addr or MeshAddresses().expander_addr, settings.expander_timeout)
                 if settings.dense_lookups else None)
        docs = DocChannels(store.driver, neo.database, refresh_seconds=settings.docgraph_refresh_seconds, budget=budget,
                           embed=embed)
        await docs.load()
    except BaseException:
        await store.close()
        raise
    return GraphBackends(GraphBackend(store, docs), GraphEntityBackend(kg, settings.attribute_other_weight), store)
