"""The one RetrieverService servicer both retrievers use.

A retriever supplies a ``RetrievalBackend`` (its store plus its channel
logic); this module validates requests, maps hits to candidates and writes
ingestion results, so every retriever behaves the same at the contract level.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import grpc

from graphmesh.common.v1 import types_pb2
from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.convert import chunked_document_to_record, failures_to_proto, hits_to_candidates
from services.common.errors import InvalidArgument, validate_query, validate_range
from services.common.records import DocumentRecord, Hit, IngestResult

MAX_TOP_K = 200
MAX_HASH_IDS = 10_000


@dataclass(slots=True)
class RetrievalQuery:
    """One retrieval request as the backends see it.

    Attributes:
        query: normalised query text.
        keywords: keyword terms (expander output, expansions included).
        embedding: query embedding; empty skips vector channels.
        hyde_embedding: HyDE passage embedding; empty when none.
        top_k: candidates wanted per channel.
        disabled: channel names switched off for this request.
    """

    query: str
    keywords: list[str]
    embedding: list[float]
    top_k: int
    hyde_embedding: list[float] = field(default_factory=list)
    disabled: frozenset[str] = frozenset()

    def enabled(self, channel: str) -> bool:
        """Whether ``channel`` may run for this request."""
        return channel not in self.disabled


class RetrievalBackend(Protocol):
    """What a retriever implements.

    ``source_by_channel`` maps each channel the backend emits to the context
    source its candidates are packed under, in priority order.
    """

    source_by_channel: dict[str, int]

    async def retrieve(self, request: RetrievalQuery) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        """Hits of every enabled channel, each channel's hits best first."""
        ...

    async def ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult: ...

    async def document_hashes(self, ids: list[str]) -> dict[str, str]: ...


def timing(stage: str, started: float, status: int = types_pb2.STAGE_STATUS_OK, detail: str = "") -> types_pb2.StageTiming:
    """A StageTiming from a perf_counter start."""
    return types_pb2.StageTiming(stage=stage, duration_ms=(time.perf_counter() - started) * 1000, status=status, detail=detail)


class RetrieverServicer(retriever_pb2_grpc.RetrieverServiceServicer):
    def __init__(self, backend: RetrievalBackend, max_query_chars: int) -> None:
        self._backend = backend
        self._max_query_chars = max_query_chars

    async def Retrieve(self, request: retriever_pb2.RetrieveRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.RetrieveResponse:
        query = validate_query(request.query, self._max_query_chars)
        top_k = validate_range(request.top_k or 20, 1, MAX_TOP_K, "top_k")
        hits, timings = await self._backend.retrieve(RetrievalQuery(
            query=query, keywords=list(request.keywords), embedding=list(request.query_embedding), top_k=top_k,
            hyde_embedding=list(request.hyde_embedding), disabled=frozenset(request.disabled_channels),
        ))
        return retriever_pb2.RetrieveResponse(
            candidates=hits_to_candidates(hits, self._backend.source_by_channel), timings=timings
        )

    async def IngestDocuments(self, request: retriever_pb2.IngestDocumentsRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.IngestDocumentsResponse:
        if not request.documents:
            raise InvalidArgument("documents", "must not be empty")
        result = await self._backend.ingest_documents([chunked_document_to_record(d) for d in request.documents])
        return retriever_pb2.IngestDocumentsResponse(
            stored=result.stored, unchanged=result.unchanged, failures=failures_to_proto(result.failures)
        )

    async def GetDocumentHashes(self, request: retriever_pb2.GetDocumentHashesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.GetDocumentHashesResponse:
        if len(request.document_ids) > MAX_HASH_IDS:
            raise InvalidArgument("document_ids", f"at most {MAX_HASH_IDS} ids per call")
        hashes = await self._backend.document_hashes(list(request.document_ids))
        return retriever_pb2.GetDocumentHashesResponse(content_hashes=hashes)


MAX_ENTITIES_PER_CALL = 10_000


def validate_entity_query(request: retriever_pb2.RetrieveEntitiesRequest, max_query_chars: int) -> tuple[str, int]:
    """(query, top_k) of a RetrieveEntitiesRequest; top_k 0 means 20.

    Raises:
        InvalidArgument: query blank or too long, top_k outside 1..200.
    """
    return validate_query(request.query, max_query_chars), validate_range(request.top_k or 20, 1, MAX_TOP_K, "top_k")


def validate_entity_batch(request: retriever_pb2.IngestEntitiesRequest) -> None:
    """Raises InvalidArgument when the batch is empty, too large, or its
    surface embeddings do not line up with its entities."""
    if not request.entities:
        raise InvalidArgument("entities", "must not be empty")
    if len(request.entities) > MAX_ENTITIES_PER_CALL:
        raise InvalidArgument("entities", f"at most {MAX_ENTITIES_PER_CALL} entities per call")
    if request.surface_embeddings and len(request.surface_embeddings) != len(request.entities):
        raise InvalidArgument("surface_embeddings", "must be empty or one entry per entity")
