"""Builds the retriever_graph service: connects to Neo4j and creates its
constraints and indexes before serving, closes the driver after draining."""
from __future__ import annotations

from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.retriever import RetrieverServicer
from services.common.server import Service
from services.retriever_graph.backend import GraphBackend
from services.retriever_graph.config import RetrieverGraphSettings
from services.retriever_graph.store import GraphStore


def build(settings: RetrieverGraphSettings | None = None) -> tuple[Service, RetrieverGraphSettings]:
    """Returns the retriever_graph Service and its settings."""
    settings = settings or RetrieverGraphSettings()
    store = GraphStore(
        settings.neo4j_uri, settings.neo4j_user or None, settings.neo4j_password or None, settings.neo4j_database
    )
    backend = GraphBackend(store)

    async def on_start() -> None:
        await store.open()
        await store.migrate()
        # The first full-text query of a fresh Neo4j takes seconds (index
        # readers, query planning); pay that before serving.
        await store.retrieve("warm up", ["warm"], 1)

    servicer = RetrieverServicer(backend, settings.max_query_chars)
    service = Service(
        name="retriever_graph",
        full_names=[retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name],
        register=lambda server: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server),
        on_start=on_start,
        on_stop=store.close,
    )
    return service, settings
