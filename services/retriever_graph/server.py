"""Builds the retriever_graph service: its async factory connects to Neo4j
and creates constraints and indexes before serving, then warms up (one
cheap real query) before health says SERVING; each RPC's remaining deadline
bounds its Neo4j transactions; the driver is closed after draining."""
from __future__ import annotations

from collections.abc import Callable

from neo4j.exceptions import ServiceUnavailable, SessionExpired

from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.retriever import RetrieverServicer
from services.common.server import Service
from services.retriever_graph.backend import open_backends
from services.retriever_graph.config import RetrieverGraphSettings

#: Neo4j down or restarting: answered UNAVAILABLE (retryable), not INTERNAL.
STORE_UNAVAILABLE_ERRORS = (ServiceUnavailable, SessionExpired, ConnectionError)


async def build(settings: RetrieverGraphSettings | None = None,
                expander_addr: str | Callable[[], str] | None = None) -> tuple[Service, RetrieverGraphSettings]:
    """Returns the retriever_graph Service and its settings. ``expander_addr``:
    where the dense lookups embed (an address, or a function returning one
    once the expander is up); default GRAPHMESH_EXPANDER_ADDR.

    Raises:
        neo4j.exceptions.DriverError: Neo4j cannot be reached.
    """
    settings = settings or RetrieverGraphSettings()
    backends = await open_backends(settings, expander_addr)
    servicer = RetrieverServicer(backends.documents, backends.entities, settings.max_query_chars)
    service = Service(
        name="retriever_graph",
        full_names=[retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name],
        register=lambda server: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server),
        on_stop=backends.close,
        unavailable_errors=STORE_UNAVAILABLE_ERRORS,
        warm_up=backends.warm_up,
        store_deadline_margin=settings.neo4j.deadline_margin,
    )
    return service, settings
