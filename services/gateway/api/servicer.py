"""GatewayService: validates requests and hands them to the use cases.

Errors raised here or below reach the caller through the error interceptor:
InvalidArgument -> INVALID_ARGUMENT naming the field; DownstreamError -> the
downstream service's own status.
"""
from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.longrunning import operations_pb2

import domains

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.errors import InvalidArgument, abort_with, validate_query, validate_range
from services.common.filters import validate_collection, validate_collections
from services.common.names import SWITCHABLE_STAGES
from services.gateway.search import deep_rules
from services.gateway.answer.handlers import Answerer
from services.gateway.config import GatewaySettings
from services.gateway.search.deep_search import DeepSearcher
from services.gateway.library.document_ingest import DocumentIngest, count_ingest, unreadable_payload
from services.gateway.library.lifecycle import DocumentLifecycle
from services.gateway.library.resource_names import parse_collection_name
from services.gateway.library.entity_ingest import EntityIngest
from services.gateway.search.entity_search import EntitySearch
from services.gateway.library.file_ingest import FileIngest
from services.gateway.library.graph_editing import GraphEditing
from services.gateway.downstream.guard import Deadline
from services.gateway.operations.runner import ImportRunner
from services.gateway.operations.state import to_operation
from services.gateway.search.scope import scope_of
from services.gateway.search.pipeline import SearchFlow

MAX_TOP_K = 100
#: Most bytes of files in one Ingest call (the gRPC message limit is 64 MiB).
MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass
class UseCases:
    """What the gateway can do, each given only the clients it needs."""

    search: SearchFlow
    answerer: Answerer
    deep: DeepSearcher
    documents: DocumentIngest
    entity_ingest: EntityIngest
    entities: EntitySearch
    files: FileIngest
    lifecycle: DocumentLifecycle
    graph: GraphEditing
    imports: ImportRunner


def validate_ingest(request: gateway_pb2.IngestRequest) -> str:
    """The collection of a well-formed Ingest / ImportDocuments request.

    Raises:
        InvalidArgument: "collection", "kind", "jsonl" (neither records nor
            files, or both) or "files" (entities or triples as files, over
            MAX_FILE_BYTES in all).
    """
    collection = validate_collection(request.collection)
    if request.kind not in gateway_pb2.IngestKind.values():
        raise InvalidArgument("kind", f"unknown ingest kind {request.kind}; known: {', '.join(gateway_pb2.IngestKind.keys())}")
    if request.files:
        if request.jsonl.strip():
            raise InvalidArgument("jsonl", "give jsonl records or files, not both")
        if request.kind in (gateway_pb2.INGEST_KIND_ENTITIES, gateway_pb2.INGEST_KIND_TRIPLES):
            raise InvalidArgument("files", "files are ingested as documents only")
        if sum(len(f.content) for f in request.files) > MAX_FILE_BYTES:
            raise InvalidArgument("files", f"at most {MAX_FILE_BYTES} bytes of files per call")
    elif not request.jsonl.strip():
        raise InvalidArgument("jsonl", "the request holds neither JSONL records nor files: give jsonl (base64 JSONL, one record "
                                       "at least) or files (one file at least)")
    return collection


class GatewayServicer(gateway_pb2_grpc.GatewayServiceServicer):
    def __init__(self, settings: GatewaySettings, use: UseCases) -> None:
        self._settings = settings
        self._use = use

    def _deadline(self, context: grpc.aio.ServicerContext) -> Deadline:
        """The request's deadline inside the gateway: the caller's remaining
        time less a margin (``deadlines.margin``, at most a tenth of it), so
        a stage that uses up its budget still leaves time to send the
        degraded answer before the caller gives up."""
        left = context.time_remaining()
        left = self._settings.deadlines.default if left is None else left
        return Deadline(max(0.001, left - min(self._settings.deadlines.margin, left / 10)))

    def _validate(self, query: str, top_k: int) -> tuple[str, int]:
        return validate_query(query, self._settings.max_query_chars), validate_range(top_k or 10, 1, MAX_TOP_K, "top_k")

    async def Search(self, request: gateway_pb2.SearchRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.SearchResponse:
        query, top_k = self._validate(request.query, request.top_k)
        for field in ("disabled_stages", "enabled_stages"):
            unknown = sorted(set(getattr(request, field)) - SWITCHABLE_STAGES)
            if unknown:
                raise InvalidArgument(field, f"unknown stage {unknown[0]!r}; known: {', '.join(sorted(SWITCHABLE_STAGES))}")
        rerank = request.rerank if request.HasField("rerank") else None
        scope = scope_of(request.collections, request.filters)
        retrieval = await self._use.search.search(query, top_k, rerank, self._deadline(context), frozenset(request.disabled_stages),
                                                  scope, frozenset(request.enabled_stages))
        return retrieval.response

    async def Answer(self, request: gateway_pb2.AnswerRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.AnswerResponse:
        query, top_k = self._validate(request.query, request.top_k)
        rerank = request.rerank if request.HasField("rerank") else None
        scope = scope_of(request.collections, request.filters)
        return await self._use.answerer.answer(query, top_k, rerank, self._deadline(context), scope)

    async def AnswerStream(self, request: gateway_pb2.AnswerStreamRequest, context: grpc.aio.ServicerContext):
        query, top_k = self._validate(request.query, request.top_k)
        rerank = request.rerank if request.HasField("rerank") else None
        scope = scope_of(request.collections, request.filters)
        async for event in self._use.answerer.events(query, top_k, rerank, self._deadline(context), scope):
            yield event

    async def DeepSearch(self, request: gateway_pb2.DeepSearchRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.DeepSearchResponse:
        query, top_k = self._validate(request.query, request.top_k)
        iterations = validate_range(request.max_iterations or deep_rules.DEFAULT_MAX_ITERATIONS, 1, 5, "max_iterations")
        sub_queries = validate_range(request.sub_queries or deep_rules.DEFAULT_SUB_QUERIES, 1, 5, "sub_queries")
        threshold = request.growth_threshold or deep_rules.DEFAULT_GROWTH_THRESHOLD
        if not 0.0 <= threshold <= 1.0:
            raise InvalidArgument("growth_threshold", "must be between 0 and 1")
        scope = scope_of(request.collections, request.filters)
        return await self._use.deep.run(query, top_k, iterations, sub_queries, threshold, self._deadline(context), scope)

    async def Ingest(self, request: gateway_pb2.IngestRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.IngestResponse:
        collection = validate_ingest(request)
        if request.files:
            return await self._use.files.ingest(list(request.files), self._deadline(context), collection, request.domain_pack)
        if request.kind in (gateway_pb2.INGEST_KIND_ENTITIES, gateway_pb2.INGEST_KIND_TRIPLES):
            response, parse_failures = await self._use.entity_ingest.ingest(request.jsonl, request.kind, self._deadline(context),
                                                                            collection)
        else:
            response, parse_failures = await self._use.documents.ingest(request.jsonl, self._deadline(context), collection,
                                                                        request.domain_pack)
        kind = gateway_pb2.IngestKind.Name(request.kind or gateway_pb2.INGEST_KIND_DOCUMENTS).removeprefix("INGEST_KIND_").lower()
        count_ingest(kind, response)
        unreadable = unreadable_payload(response, parse_failures)
        if unreadable is not None:
            raise unreadable
        return response

    async def ImportDocuments(self, request: gateway_pb2.IngestRequest, context: grpc.aio.ServicerContext) -> operations_pb2.Operation:
        collection = validate_ingest(request)
        return to_operation(await self._use.imports.start(request, collection))

    async def SearchEntities(self, request: gateway_pb2.SearchEntitiesRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.SearchEntitiesResponse:
        query = validate_query(request.query, self._settings.max_entity_query_chars)
        top_k = validate_range(request.top_k or 10, 1, MAX_TOP_K, "top_k")
        collections = tuple(validate_collections(request.collections))
        return await self._use.entities.search(query, top_k, self._deadline(context), collections)

    async def GetDocument(self, request: gateway_pb2.GetDocumentRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.GetDocumentResponse:
        return await self._use.lifecycle.get(request.name, self._deadline(context), request.view)

    async def ListDocuments(self, request: gateway_pb2.ListDocumentsRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.ListDocumentsResponse:
        return await self._use.lifecycle.list(request.parent, request.page_size, request.page_token, request.filter,
                                              self._deadline(context))

    async def DeleteDocuments(self, request: gateway_pb2.DeleteDocumentsRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.DeleteDocumentsResponse:
        return await self._use.lifecycle.delete(request.parent, list(request.names), request.filter, self._deadline(context))

    async def ListCollections(self, request: gateway_pb2.ListCollectionsRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.ListCollectionsResponse:
        return await self._use.lifecycle.list_collections(self._deadline(context))

    async def ListDomainPacks(self, request: gateway_pb2.ListDomainPacksRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.ListDomainPacksResponse:
        return gateway_pb2.ListDomainPacksResponse(packs=[
            gateway_pb2.DomainPackInfo(name=p.name, description=p.description, question_types=list(p.question_types),
                                       channels=list(p.channels), recipe_source=p.recipe_source)
            for _, p in sorted(domains.PACKS.items())])

    async def DeleteCollection(self, request: gateway_pb2.DeleteCollectionRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.DeleteCollectionResponse:
        """Deletes a collection from every store; FAILED_PRECONDITION while an
        import into it runs (it would store its next batches into the
        collection again: cancel it first), NOT_FOUND when no store holds it."""
        name = parse_collection_name(request.name)
        running = await self._use.imports.running_into(name)
        if running:
            await abort_with(context, grpc.StatusCode.FAILED_PRECONDITION, "IMPORT_RUNNING",
                             f"an import into collection {name!r} is running ({running[0]}); it would store its next "
                             f"batches into the collection again: cancel it first (graphmesh operations cancel "
                             f"{running[0]}, POST /v1/{running[0]}:cancel) or wait for it to end")
        return await self._use.lifecycle.delete_collection(request.name, self._deadline(context))

    async def GetEntity(self, request: gateway_pb2.GetEntityRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.GetEntityResponse:
        return await self._use.graph.get(request.name, self._deadline(context))

    async def UpdateEntity(self, request: gateway_pb2.UpdateEntityRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.UpdateEntityResponse:
        return await self._use.graph.update(request.name, request.entity, list(request.update_mask.paths), self._deadline(context))

    async def DeleteEntity(self, request: gateway_pb2.DeleteEntityRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.DeleteEntityResponse:
        return await self._use.graph.delete(request.name, self._deadline(context))

    async def MergeEntities(self, request: gateway_pb2.MergeEntitiesRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.MergeEntitiesResponse:
        return await self._use.graph.merge(request.name, list(request.entities), self._deadline(context))

    async def CreateRelation(self, request: gateway_pb2.CreateRelationRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.CreateRelationResponse:
        return await self._use.graph.create_relation(request.parent, request.relation, self._deadline(context))

    async def DeleteRelation(self, request: gateway_pb2.DeleteRelationRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.DeleteRelationResponse:
        return await self._use.graph.delete_relation(request.parent, request.relation, self._deadline(context))

    async def ExportEntities(self, request: gateway_pb2.ExportEntitiesRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.ExportEntitiesResponse:
        return await self._use.graph.export(request.parent, request.page_size, request.page_token, self._deadline(context))
