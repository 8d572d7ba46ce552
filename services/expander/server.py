"""Builds the expander service."""
from __future__ import annotations

import asyncio

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from services.common.server import Service
from services.common.settings import MeshAddresses
from services.expander.config import ExpanderSettings
from services.expander.entity_servicer import EntityExpanderServicer
from services.expander.library import LibraryLoader
from services.expander.query_cut import term_weights


async def build(settings: ExpanderSettings | None = None, addresses: MeshAddresses | None = None) -> tuple[Service, ExpanderSettings]:
    """Returns the expander Service and its settings (from the environment
    when not given). The entity library comes from ``settings.library_addr``,
    else the graph retriever's address in ``addresses``."""
    settings = settings or ExpanderSettings()
    if settings.library_addr == "none":
        library_addr = ""
    else:
        library_addr = settings.library_addr or (addresses or MeshAddresses()).retriever_graph_addr
    library = LibraryLoader(library_addr, settings.synonym_files, settings.library_refresh_seconds)
    servicer = EntityExpanderServicer(settings, library)

    async def warm_up(_port: int) -> None:
        # Load the embedding model right after the server starts serving, so
        # the first query does not pay for it (still lazy: health is SERVING
        # before the load finishes).
        await servicer.embedder()
        # jieba's dictionary and IDF table, read on first use (about 1 s)
        await asyncio.to_thread(term_weights, "预热")

    async def on_stop() -> None:
        await servicer.close()
        await library.close()

    service = Service(
        name="expander",
        extra_tasks=[warm_up],
        full_names=[expander_pb2.DESCRIPTOR.services_by_name["ExpanderService"].full_name],
        register=lambda server: expander_pb2_grpc.add_ExpanderServiceServicer_to_server(servicer, server),
        on_start=servicer.warm_up,
        on_stop=on_stop,
    )
    return service, settings
