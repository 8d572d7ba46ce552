"""gRPC adapters of the client interfaces in ``services.gateway.downstream.interfaces``:
each wraps the service's generated stub on a shared channel and turns a
failed call into ``DownstreamError`` (code, message and rich details kept).
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from graphmesh.expander.v1 import expander_pb2_grpc
from graphmesh.fuser.v1 import fuser_pb2_grpc
from graphmesh.reranker.v1 import reranker_pb2_grpc
from graphmesh.retriever.v1 import retriever_pb2_grpc
from services.common.admission import Admission, Overloaded
from services.common.clients import channel
from services.common.errors import DownstreamError


#: Calls one downstream channel carries at once: below the services' limit
#: of streams per connection (ServiceSettings.max_concurrent_streams, 100),
#: so a burst waits in the gateway instead of having streams reset.
MAX_IN_FLIGHT_PER_CHANNEL = 64
#: Calls that may wait for one of those slots; beyond, RESOURCE_EXHAUSTED.
MAX_QUEUED_PER_CHANNEL = 4096


class _Adapter:
    """One service's stub on its own channel, at most
    MAX_IN_FLIGHT_PER_CHANNEL calls in flight on it."""

    def __init__(self, name: str, address: str, stub_class: Callable[[grpc.aio.Channel], Any]) -> None:
        self.name = name
        self._channel = channel(address)
        self._stub = stub_class(self._channel)
        self._admission = Admission(MAX_IN_FLIGHT_PER_CHANNEL, MAX_QUEUED_PER_CHANNEL, f"calls to {name}")

    async def _call(self, rpc: str, request: Any, timeout: float) -> Any:
        try:
            async with self._admission.slot(timeout) as waited:
                remaining = None if timeout is None else max(timeout - waited, 0.001)
                return await getattr(self._stub, rpc)(request, timeout=remaining)
        except Overloaded as busy:
            code = grpc.StatusCode.DEADLINE_EXCEEDED if busy.waited else grpc.StatusCode.RESOURCE_EXHAUSTED
            raise DownstreamError(self.name, code, str(busy)) from None
        except grpc.aio.AioRpcError as err:
            raise DownstreamError.from_rpc(self.name, err) from None

    async def close(self) -> None:
        """Closes the channel."""
        await self._channel.close()


def _rpc(name: str) -> Callable[[_Adapter, Any, float], Awaitable[Any]]:
    async def call(self: _Adapter, request: Any, timeout: float) -> Any:
        return await self._call(name, request, timeout)

    call.__doc__ = f"The {name} RPC (DownstreamError on failure)."
    return call


class GrpcExpander(_Adapter):
    """services.gateway.downstream.interfaces.Expander over gRPC."""

    def __init__(self, address: str) -> None:
        super().__init__("expander", address, expander_pb2_grpc.ExpanderServiceStub)

    expand = _rpc("Expand")
    embed = _rpc("Embed")
    rewrite = _rpc("Rewrite")
    normalize_entity = _rpc("NormalizeEntity")


class GrpcRetriever(_Adapter):
    """services.gateway.downstream.interfaces.Retriever over gRPC; ``name`` is the
    retriever's service name ("retriever_pg", "retriever_graph")."""

    def __init__(self, name: str, address: str) -> None:
        super().__init__(name, address, retriever_pb2_grpc.RetrieverServiceStub)

    retrieve = _rpc("Retrieve")
    ingest_documents = _rpc("IngestDocuments")
    get_document_hashes = _rpc("GetDocumentHashes")
    ingest_entities = _rpc("IngestEntities")
    ingest_triples = _rpc("IngestTriples")
    retrieve_entities = _rpc("RetrieveEntities")
    suggest_expansions = _rpc("SuggestExpansions")
    related = _rpc("Related")
    list_documents = _rpc("ListDocuments")
    delete_documents = _rpc("DeleteDocuments")
    list_collections = _rpc("ListCollections")
    delete_collection = _rpc("DeleteCollection")
    export_entities = _rpc("ExportEntities")
    delete_entities = _rpc("DeleteEntities")
    delete_triples = _rpc("DeleteTriples")


class GrpcReranker(_Adapter):
    """services.gateway.downstream.interfaces.Reranker over gRPC."""

    def __init__(self, address: str) -> None:
        super().__init__("reranker", address, reranker_pb2_grpc.RerankerServiceStub)

    rerank = _rpc("Rerank")


class GrpcFuser(_Adapter):
    """services.gateway.downstream.interfaces.Fuser over gRPC."""

    def __init__(self, address: str) -> None:
        super().__init__("fuser", address, fuser_pb2_grpc.FuserServiceStub)

    fuse = _rpc("Fuse")
    rank_entities = _rpc("RankEntities")
