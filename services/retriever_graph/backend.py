"""retriever_graph channels: heading lookup, Chinese full-text and 1-hop
neighbours in Neo4j."""
from __future__ import annotations

import time

from graphmesh.common.v1 import types_pb2
from services.common.records import DocumentRecord, Hit, IngestResult
from services.common.retriever import RetrievalQuery, timing
from services.retriever_graph.store import GraphStore


class GraphBackend:
    """RetrievalBackend over a GraphStore."""

    source_by_channel = {
        "graph.heading": types_pb2.SOURCE_GRAPH,
        "graph.fulltext": types_pb2.SOURCE_GRAPH,
        "graph.neighbour": types_pb2.SOURCE_GRAPH,
    }

    def __init__(self, store: GraphStore) -> None:
        self.store = store

    async def retrieve(self, request: RetrievalQuery) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        started = time.perf_counter()
        hits = await self.store.retrieve(request.query, request.keywords, request.top_k)
        hits = [h for h in hits if request.enabled(h.channel)]
        return hits, [timing("graph.retrieve", started)]

    async def ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult:
        return await self.store.ingest_documents(docs)

    async def document_hashes(self, ids: list[str]) -> dict[str, str]:
        return await self.store.document_hashes(ids)
