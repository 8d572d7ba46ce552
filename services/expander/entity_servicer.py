"""ExpanderService with entity normalisation: NormaliseEntity over the
read-only library index (services.expander.normalise)."""
from __future__ import annotations

import asyncio

import logging

import grpc
import jieba

from graphmesh.expander.v1 import expander_pb2
from services.common.errors import validate_query
from services.expander.config import ExpanderSettings
from services.expander.library import LibraryLoader
from services.expander.normalise import ROUTE_MIN_CONFIDENCE, normalise, route
from services.expander.servicer import ExpanderServicer

log = logging.getLogger(__name__)

ROUTES = {
    "local": expander_pb2.ENTITY_ROUTE_LOCAL,
    "global": expander_pb2.ENTITY_ROUTE_GLOBAL,
    "cross_category": expander_pb2.ENTITY_ROUTE_CROSS_CATEGORY,
    "attribute": expander_pb2.ENTITY_ROUTE_ATTRIBUTE,
}


class EntityExpanderServicer(ExpanderServicer):
    """Adds NormaliseEntity; the library is loaded lazily on first use."""

    def __init__(self, settings: ExpanderSettings) -> None:
        super().__init__(settings)
        self.library = LibraryLoader(
            settings.library_neo4j_uri, settings.library_neo4j_user, settings.library_neo4j_password,
            settings.library_neo4j_database, settings.synonym_files, settings.library_refresh_seconds,
        )

    async def warm_up(self) -> None:
        """Starts loading the library index in the background (best effort:
        a store that is not reachable yet is retried on first use)."""

        async def load() -> None:
            try:
                await self.library.get()
            except Exception as err:  # noqa: BLE001 - retried lazily
                log.info("entity library not loaded at start: %s", err)

        self._warming = asyncio.create_task(load())

    async def NormaliseEntity(self, request: expander_pb2.NormaliseEntityRequest, context: grpc.aio.ServicerContext) -> expander_pb2.NormaliseEntityResponse:
        query = validate_query(request.query, self._settings.max_entity_query_chars)
        query = " ".join(query.split())
        index = await self.library.get()
        keywords = [w for w in jieba.cut_for_search(query) if len(w.strip()) >= 2]
        if index is None:
            return expander_pb2.NormaliseEntityResponse(normalized_query=query, gate_reason="no_library", keywords=keywords)
        n = await asyncio.to_thread(normalise, query, index)
        r = route(query, index, n)
        applied = r.confidence >= ROUTE_MIN_CONFIDENCE
        return expander_pb2.NormaliseEntityResponse(
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
