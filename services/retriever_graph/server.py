"""Builds the retriever_graph service: connects to Neo4j and creates its
constraints and indexes before serving, closes the driver after draining."""
from __future__ import annotations

from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.server import Service
from services.retriever_graph.backend import GraphBackend
from services.retriever_graph.config import RetrieverGraphSettings
from services.retriever_graph.entity_servicer import GraphRetrieverServicer
from services.retriever_graph.kg_store import KnowledgeGraphStore
from services.retriever_graph.store import GraphStore


def build(settings: RetrieverGraphSettings | None = None) -> tuple[Service, RetrieverGraphSettings]:
    """Returns the retriever_graph Service and its settings."""
    settings = settings or RetrieverGraphSettings()
    store = GraphStore(
        settings.neo4j_uri, settings.neo4j_user or None, settings.neo4j_password or None, settings.neo4j_database
    )
    backend = GraphBackend(store)
    kg: list[KnowledgeGraphStore] = []

    async def on_start() -> None:
        await store.open()
        await store.migrate()
        # The first full-text query of a fresh Neo4j takes seconds (index
        # readers, query planning); pay that before serving.
        await store.retrieve("warm up", ["warm"], 1)
        kg.append(KnowledgeGraphStore(store.driver, settings.neo4j_database, settings.expansion_weights))
        await kg[0].migrate()

    servicer = GraphRetrieverServicer(
        backend, settings.max_query_chars, lambda: kg[0], settings.attribute_other_weight
    )
    service = Service(
        name="retriever_graph",
        full_names=[retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name],
        register=lambda server: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server),
        on_start=on_start,
        on_stop=store.close,
    )
    return service, settings
