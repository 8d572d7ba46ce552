"""ExpanderService with entity normalization: NormalizeEntity over the
read-only library index (services.expander.normalize), loaded from the graph
retriever's GetEntityLibrary RPC."""
from __future__ import annotations

import asyncio
import logging

import grpc
import jieba

from graphmesh.expander.v1 import expander_pb2
from services.common.errors import validate_query
from services.expander.config import ExpanderSettings
from services.expander.library import LibraryLoader
from services.expander.normalize import ROUTE_MIN_CONFIDENCE, normalize, route
from services.expander.servicer import ExpanderServicer

log = logging.getLogger(__name__)

ROUTES = {
    "local": expander_pb2.ENTITY_ROUTE_LOCAL,
    "global": expander_pb2.ENTITY_ROUTE_GLOBAL,
    "cross_category": expander_pb2.ENTITY_ROUTE_CROSS_CATEGORY,
    "attribute": expander_pb2.ENTITY_ROUTE_ATTRIBUTE,
}


class EntityExpanderServicer(ExpanderServicer):
    """Adds NormalizeEntity; the library is loaded lazily on first use.

    Args:
        settings: the expander's settings.
        library: the loader of the entity library (its address "" = none).
    """

    def __init__(self, settings: ExpanderSettings, library: LibraryLoader) -> None:
        super().__init__(settings)
        self.library = library
        self._warming: asyncio.Task | None = None

    async def warm_up(self) -> None:
        """Starts loading the library index in the background (best effort:
        a retriever that is not reachable yet is retried on first use)."""

        async def load() -> None:
            try:
                await self.library.get()
            except Exception as err:  # noqa: BLE001 - retried lazily
                log.info("entity library not loaded at start: %s", err)

        self._warming = asyncio.create_task(load())

    async def NormalizeEntity(self, request: expander_pb2.NormalizeEntityRequest, context: grpc.aio.ServicerContext) -> expander_pb2.NormalizeEntityResponse:
        query = validate_query(request.query, self._settings.max_entity_query_chars)
        query = " ".join(query.split())
        index = await self.library.get()
        keywords = [w for w in jieba.cut_for_search(query) if len(w.strip()) >= 2]
        if index is None:
            return expander_pb2.NormalizeEntityResponse(normalized_query=query, gate_reason="no_library", keywords=keywords)
        n = await asyncio.to_thread(normalize, query, index)
        r = route(query, index, n)
        applied = r.confidence >= ROUTE_MIN_CONFIDENCE
        return expander_pb2.NormalizeEntityResponse(
            normalized_query=n.normalized_query,
            rewritten=n.rewritten,
            gate_reason=n.reason,
            matches=[expander_pb2.NameMatch(name=m.name, matched=m.matched, method=m.method, score=m.score) for m in n.matches[:10]],
            route=ROUTES.get(r.route, expander_pb2.ENTITY_ROUTE_UNSPECIFIED) if applied else expander_pb2.ENTITY_ROUTE_UNSPECIFIED,
            route_confidence=r.confidence,
            categories=r.categories,
            attribute_values=r.attribute_values,
            attribute_label=r.attribute_label,
            keywords=keywords,
            library_size=len(index),
        )
