"""Builds the expander service."""
from __future__ import annotations

import asyncio

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from services.common.cross_lingual import Lexicon
from services.common.server import Service
from services.common.settings import MeshAddresses
from services.expander.config import ExpanderSettings
from services.expander.entity_servicer import EntityExpanderServicer
from services.expander.library import LibraryLoader
from services.expander.query_cut import term_weights


async def build(settings: ExpanderSettings | None = None, addresses: MeshAddresses | None = None) -> tuple[Service, ExpanderSettings]:
    """Returns the expander Service and its settings (from the environment
    when not given). The entity library comes from ``settings.library.addr``,
    else the graph retriever's address in ``addresses``."""
    settings = settings or ExpanderSettings()
    if settings.library.addr == "none":
        library_addr = ""
    else:
        library_addr = settings.library.addr or (addresses or MeshAddresses()).retriever_graph_addr
    library = LibraryLoader(library_addr, settings.synonym_files, settings.library.refresh_seconds)
    servicer = EntityExpanderServicer(settings, library)

    async def ready() -> None:
        # Readiness: the embedding model and the tokenizer are loaded before
        # health says SERVING (serve() runs on_start first), so a restarted
        # expander takes traffic only once it can answer within a deadline.
        # Loading them after SERVING made the gateway's calls time out for
        # about 12 s after a restart under load (fault matrix, issue 16).
        await servicer.warm_up()
        await servicer.embedder()
        # jieba's dictionary and IDF table, read on first use (about 1 s)
        await asyncio.to_thread(term_weights, "预热")
        # the bilingual dictionary every Expand translates with (about 2 s)
        await asyncio.to_thread(Lexicon.load)

    async def warm_up() -> None:
        # One real embedding through the model itself (not the cache), after
        # the port is bound and before health says SERVING: the first
        # inference of an ONNX session is several times slower than the next.
        embedder = await servicer.embedder()
        await asyncio.to_thread(embedder.inner.embed, ["预热查询"], query=True)

    async def on_stop() -> None:
        await servicer.close()
        await library.close()

    service = Service(
        name="expander",
        full_names=[expander_pb2.DESCRIPTOR.services_by_name["ExpanderService"].full_name],
        register=lambda server: expander_pb2_grpc.add_ExpanderServiceServicer_to_server(servicer, server),
        on_start=ready,
        warm_up=warm_up,
        on_stop=on_stop,
    )
    return service, settings
