"""Builds the retriever_pg service: opens the pool and applies migrations
before serving, closes the pool after draining."""
from __future__ import annotations

import asyncio
from pathlib import Path

from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.retriever_pg.entity_servicer import PgRetrieverServicer
from services.retriever_pg.entity_store import EntityCardStore
from services.common.server import Service
from services.retriever_pg.backend import PgBackend, PgChannelConfig
from services.retriever_pg.config import RetrieverPgSettings
from services.retriever_pg.store import PgStore


def build(settings: RetrieverPgSettings | None = None) -> tuple[Service, RetrieverPgSettings]:
    """Returns the retriever_pg Service and its settings."""
    settings = settings or RetrieverPgSettings()
    holder: dict[str, PgStore] = {}
    entity_stores: list[EntityCardStore] = []
    channels = PgChannelConfig(
        fulltext=settings.fulltext_enabled, trigram=settings.trigram_enabled, boost=settings.boost_enabled,
        short_query_chars=settings.short_query_chars, boost_window=settings.boost_window, boost_limit=settings.boost_limit,
    )
    backend = PgBackend(None, channels)  # type: ignore[arg-type]  # store attached in on_start

    async def on_start() -> None:
        dsn = settings.dsn
        if not dsn:
            from services.retriever_pg.embedded import start_embedded_postgres

            dsn = await asyncio.to_thread(start_embedded_postgres, Path(settings.data_dir))
        store = PgStore(
            dsn, settings.embedding_dim, ef_search=settings.ef_search, pool_max=settings.pool_max,
            bm25_k1=settings.bm25_k1, bm25_b=settings.bm25_b,
        )
        await store.open()
        await store.migrate()
        holder["store"] = store
        entity_stores.append(EntityCardStore(
            store.connection, settings.embedding_dim, ef_search=settings.ef_search, bm25_k1=settings.bm25_k1, bm25_b=settings.bm25_b))
        backend.store = store

    async def on_stop() -> None:
        if "store" in holder:
            await holder["store"].close()

    servicer = PgRetrieverServicer(backend, settings.max_query_chars, lambda: entity_stores[0], lambda: holder["store"].connection())
    service = Service(
        name="retriever_pg",
        full_names=[retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name],
        register=lambda server: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server),
        on_start=on_start,
        on_stop=on_stop,
    )
    return service, settings
