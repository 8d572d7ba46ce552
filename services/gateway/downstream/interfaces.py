"""The gateway's view of each downstream service: one small interface per
service, in terms of the services' own request and response messages.

The orchestration modules (search, ingest, answer chain, deep search, entity
search) receive these and nothing else, so unit tests drive them with small
fakes; ``grpc_clients`` adapts the real gRPC stubs. Every method takes the
``timeout`` in seconds the caller allows and raises
``services.common.errors.DownstreamError`` when the service answers with an
error (a fake may also hang or raise ``asyncio.TimeoutError``; the guard in
``services.gateway.downstream.guard`` bounds every call by its timeout).
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from graphmesh.expander.v1 import expander_pb2 as ex
from graphmesh.fuser.v1 import fuser_pb2 as fu
from graphmesh.reranker.v1 import reranker_pb2 as rr
from graphmesh.retriever.v1 import retriever_pb2 as rt


class Expander(Protocol):
    """graphmesh.expander.v1.ExpanderService."""

    async def expand(self, request: ex.ExpandRequest, timeout: float) -> ex.ExpandResponse: ...

    async def embed(self, request: ex.EmbedRequest, timeout: float) -> ex.EmbedResponse: ...

    async def rewrite(self, request: ex.RewriteRequest, timeout: float) -> ex.RewriteResponse: ...

    async def normalize_entity(self, request: ex.NormalizeEntityRequest, timeout: float) -> ex.NormalizeEntityResponse: ...


class Retriever(Protocol):
    """graphmesh.retriever.v1.RetrieverService, one per retriever.

    Attributes:
        name: the service's name ("retriever_pg", "retriever_graph"), used
            for stage names and in ``degraded``.
    """

    name: str

    async def retrieve(self, request: rt.RetrieveRequest, timeout: float) -> rt.RetrieveResponse: ...

    async def ingest_documents(self, request: rt.IngestDocumentsRequest, timeout: float) -> rt.IngestDocumentsResponse: ...

    async def get_document_hashes(self, request: rt.GetDocumentHashesRequest, timeout: float) -> rt.GetDocumentHashesResponse: ...

    async def ingest_entities(self, request: rt.IngestEntitiesRequest, timeout: float) -> rt.IngestEntitiesResponse: ...

    async def ingest_triples(self, request: rt.IngestTriplesRequest, timeout: float) -> rt.IngestTriplesResponse: ...

    async def retrieve_entities(self, request: rt.RetrieveEntitiesRequest, timeout: float) -> rt.RetrieveEntitiesResponse: ...

    async def suggest_expansions(self, request: rt.SuggestExpansionsRequest, timeout: float) -> rt.SuggestExpansionsResponse: ...

    async def related(self, request: rt.RelatedRequest, timeout: float) -> rt.RelatedResponse: ...

    async def list_documents(self, request: rt.ListDocumentsRequest, timeout: float) -> rt.ListDocumentsResponse: ...

    async def delete_documents(self, request: rt.DeleteDocumentsRequest, timeout: float) -> rt.DeleteDocumentsResponse: ...

    async def list_collections(self, request: rt.ListCollectionsRequest, timeout: float) -> rt.ListCollectionsResponse: ...

    async def delete_collection(self, request: rt.DeleteCollectionRequest, timeout: float) -> rt.DeleteCollectionResponse: ...

    async def export_entities(self, request: rt.ExportEntitiesRequest, timeout: float) -> rt.ExportEntitiesResponse: ...

    async def delete_entities(self, request: rt.DeleteEntitiesRequest, timeout: float) -> rt.DeleteEntitiesResponse: ...

    async def delete_triples(self, request: rt.DeleteTriplesRequest, timeout: float) -> rt.DeleteTriplesResponse: ...


class Reranker(Protocol):
    """graphmesh.reranker.v1.RerankerService."""

    async def rerank(self, request: rr.RerankRequest, timeout: float) -> rr.RerankResponse: ...


class Fuser(Protocol):
    """graphmesh.fuser.v1.FuserService."""

    async def fuse(self, request: fu.FuseRequest, timeout: float) -> fu.FuseResponse: ...

    async def rank_entities(self, request: fu.RankEntitiesRequest, timeout: float) -> fu.RankEntitiesResponse: ...


class Llm(Protocol):
    """An OpenAI-compatible chat endpoint (services.common.llm.LlmClient).

    ``complete`` and ``stream`` raise services.common.llm.LlmError when the
    endpoint is disabled, times out or fails after bounded retries; ``extra``
    holds request fields only some servers understand (llama.cpp's
    "grammar").
    """

    @property
    def enabled(self) -> bool: ...

    async def complete(self, messages: list[dict[str, str]], max_tokens: int, timeout: float | None = None,
                       purpose: str = "answer", extra: Mapping[str, object] | None = None) -> str: ...

    def stream(self, messages: list[dict[str, str]], max_tokens: int, timeout: float | None = None,
               purpose: str = "answer", extra: Mapping[str, object] | None = None) -> AsyncIterator[str]: ...
