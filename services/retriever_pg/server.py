"""Builds the retriever_pg service: its async factory opens the pool and
applies migrations before serving, then warms up (one cheap real query)
before health says SERVING; each RPC's remaining deadline bounds its
statements (statement_timeout); the pool is closed after draining."""
from __future__ import annotations

import asyncpg

from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.retriever import RetrieverServicer
from services.common.server import Service
from services.retriever_pg.backend import open_backends
from services.retriever_pg.config import RetrieverPgSettings

#: PostgreSQL down or restarting: answered UNAVAILABLE (retryable), not INTERNAL.
STORE_UNAVAILABLE_ERRORS = (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError, asyncpg.CannotConnectNowError)


async def build(settings: RetrieverPgSettings | None = None) -> tuple[Service, RetrieverPgSettings]:
    """Returns the retriever_pg Service and its settings.

    Raises:
        asyncpg.PostgresError / OSError: the database cannot be reached.
    """
    settings = settings or RetrieverPgSettings()
    backends = await open_backends(settings)
    servicer = RetrieverServicer(backends.documents, backends.entities, settings.max_query_chars)
    service = Service(
        name="retriever_pg",
        full_names=[retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name],
        register=lambda server: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server),
        on_stop=backends.close,
        unavailable_errors=STORE_UNAVAILABLE_ERRORS,
        warm_up=backends.warm_up,
        store_deadline_margin=settings.store.deadline_margin,
    )
    return service, settings
