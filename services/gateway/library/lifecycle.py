"""The document lifecycle: GetDocument, ListDocuments, DeleteDocuments,
ListCollections and DeleteCollection over every retriever.

Reads (get, list) ask retriever_pg, the store of record for documents (the
first retriever when there is none of that name). Deletions go to every
retriever in parallel and fail when any of them fails (they are
idempotent, so the caller retries the same call); each store deletes
atomically and the response says what each removed.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import grpc

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common.errors import DownstreamError, InvalidArgument, NotFound
from services.common.filters import parse_filter, to_proto
from services.gateway.search.collection_packs import PRIMARY, CollectionPacks
from services.gateway.downstream.interfaces import Retriever
from services.gateway.downstream.guard import Deadline
from services.gateway.library.resource_names import (decode_page_token, document_name, encode_page_token, parse_collection_name,
                                             parse_document_name, parse_parent)

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
MAX_DELETE_NAMES = 10_000
#: Seconds a lifecycle call to one store may take at most.
CALL_SECONDS = 120.0
_COUNT_FIELDS = ("documents", "chunks", "entities")


def _named(doc: types_pb2.StoredDocument) -> types_pb2.StoredDocument:
    doc.name = document_name(doc.collection, doc.id)
    return doc


class DocumentLifecycle:
    """Lifecycle RPCs over ``retrievers`` (each a RetrieverService client)."""

    def __init__(self, retrievers: Sequence[Retriever], packs: CollectionPacks | None = None) -> None:
        self.retrievers = list(retrievers)
        self.packs = packs

    def _primary(self) -> Retriever:
        if not self.retrievers:
            raise DownstreamError("retrievers", grpc.StatusCode.UNAVAILABLE, "no retriever configured")
        return next((r for r in self.retrievers if r.name == PRIMARY), self.retrievers[0])

    async def get(self, name: str, deadline: Deadline,
                  view: int = gateway_pb2.DOCUMENT_VIEW_BASIC) -> gateway_pb2.GetDocumentResponse:
        """The stored document of ``name``; with ``view`` DOCUMENT_VIEW_FULL,
        its chunks in reading order too.

        Raises:
            InvalidArgument ("name", "view"); NotFound: not stored (in that collection).
        """
        collection, doc_id = parse_document_name(name)
        if view not in gateway_pb2.DocumentView.values():
            raise InvalidArgument("view", f"unknown view {view}; use DOCUMENT_VIEW_BASIC or DOCUMENT_VIEW_FULL")
        request = retriever_pb2.ListDocumentsRequest(ids=[doc_id], page_size=1,
                                                     collections=[collection] if collection else [],
                                                     with_chunks=view == gateway_pb2.DOCUMENT_VIEW_FULL)
        reply = await self._primary().list_documents(request, deadline.left(CALL_SECONDS))
        if not reply.documents:
            raise NotFound(f"document {name!r} is not stored")
        return gateway_pb2.GetDocumentResponse(document=_named(reply.documents[0]))

    async def list(self, parent: str, page_size: int, page_token: str, filter_text: str,
                   deadline: Deadline) -> gateway_pb2.ListDocumentsResponse:
        """One page of the parent's documents meeting ``filter_text``, by id.

        Raises:
            InvalidArgument: parent, page_size, page_token or filter.
            NotFound: the parent names a collection no store holds (the
                default collection, which needs no creating, lists empty).
        """
        collections = parse_parent(parent)
        if collections:
            await self._require(collections[0], deadline)
        if not 0 <= page_size <= MAX_PAGE_SIZE:
            raise InvalidArgument("page_size", f"must be between 0 and {MAX_PAGE_SIZE}")
        size = page_size or DEFAULT_PAGE_SIZE
        conditions = parse_filter(filter_text)
        after = decode_page_token(page_token, parent, filter_text)
        request = retriever_pb2.ListDocumentsRequest(collections=collections or [], filters=to_proto(conditions),
                                                     page_size=size + 1, after_id=after)
        reply = await self._primary().list_documents(request, deadline.left(CALL_SECONDS))
        page = [_named(d) for d in reply.documents[:size]]
        token = encode_page_token(page[-1].id, parent, filter_text) if len(reply.documents) > size else ""
        return gateway_pb2.ListDocumentsResponse(documents=page, next_page_token=token)

    async def delete(self, parent: str, names: Sequence[str], filter_text: str,
                     deadline: Deadline) -> gateway_pb2.DeleteDocumentsResponse:
        """Deletes the named documents, or the parent's documents meeting
        ``filter_text``, from every store.

        Raises:
            InvalidArgument: parent, names (one not under parent) or filter;
                neither names nor filter given.
            NotFound: the parent or a name's collection is one no store holds (nothing was deleted).
            DownstreamError: a store failed (call again: deletion is idempotent).
        """
        collections = parse_parent(parent)
        if len(names) > MAX_DELETE_NAMES:
            raise InvalidArgument("names", f"at most {MAX_DELETE_NAMES} names per call")
        if not names and not filter_text.strip():
            raise InvalidArgument("names", "give document names, or a filter (DeleteCollection removes a whole collection)")
        conditions = parse_filter(filter_text)
        groups: dict[str | None, list[str]] = {}
        for i, name in enumerate(names):
            collection, doc_id = parse_document_name(name, f"names[{i}]")
            if collections is not None and collection not in (None, collections[0]):
                raise InvalidArgument(f"names[{i}]", f"is not under {parent}")
            groups.setdefault(collection or (collections[0] if collections else None), []).append(doc_id)
        for collection in sorted({c for c in groups if c} | set(collections or ())):
            await self._require(collection, deadline, deleting=True)  # a misspelt collection deleted nothing, said OK
        requests = [retriever_pb2.DeleteDocumentsRequest(ids=ids, collections=[c] if c else [], filters=to_proto(conditions))
                    for c, ids in groups.items()]
        if not names:
            requests = [retriever_pb2.DeleteDocumentsRequest(collections=collections or [], filters=to_proto(conditions))]
            if collections is None:  # every collection: name them, the stores need a scope
                known = await self.list_collections(deadline)
                requests[0].collections.extend(c.name for c in known.collections)
                if not requests[0].collections:
                    return gateway_pb2.DeleteDocumentsResponse()
        response = gateway_pb2.DeleteDocumentsResponse()
        ids: set[str] = set()
        for request in requests:
            for store, reply in await self._everywhere(lambda r, t, q=request: r.delete_documents(q, t), deadline):
                _add(response.by_store[store], reply.deleted)
                ids.update(reply.document_ids)
        response.deleted_documents = max((c.documents for c in response.by_store.values()), default=0)
        response.document_ids.extend(sorted(ids))
        return response

    async def list_collections(self, deadline: Deadline) -> gateway_pb2.ListCollectionsResponse:
        """Every collection any store holds; each count the largest a store reports."""
        merged: dict[str, types_pb2.CollectionInfo] = {}
        request = retriever_pb2.ListCollectionsRequest()
        for _, reply in await self._everywhere(lambda r, t: r.list_collections(request, t), deadline):
            for c in reply.collections:
                into = merged.setdefault(c.name, types_pb2.CollectionInfo(name=c.name))
                for f in _COUNT_FIELDS:
                    setattr(into, f, max(getattr(into, f), getattr(c, f)))
                into.domain_pack = into.domain_pack or c.domain_pack
        return gateway_pb2.ListCollectionsResponse(collections=[merged[n] for n in sorted(merged)])

    async def delete_collection(self, name: str, deadline: Deadline) -> gateway_pb2.DeleteCollectionResponse:
        """Deletes collection ``name`` from every store.

        Raises:
            InvalidArgument ("name"); NotFound: no store holds it;
            DownstreamError: a store failed.
        """
        request = retriever_pb2.DeleteCollectionRequest(name=parse_collection_name(name))
        await self._require(request.name, deadline, deleting=True)
        response = gateway_pb2.DeleteCollectionResponse()
        for store, reply in await self._everywhere(lambda r, t: r.delete_collection(request, t), deadline):
            response.by_store[store].CopyFrom(reply.deleted)
        if self.packs is not None:
            self.packs.forget(request.name)
        return response

    async def _require(self, collection: str, deadline: Deadline, deleting: bool = False) -> None:
        """Raises NotFound when no store holds ``collection`` (CollectionPacks.require); a gateway without a
        collection registry never refuses."""
        if self.packs is not None:
            await self.packs.require(collection, deadline, deleting)

    async def _everywhere(self, call: Callable[[Retriever, float], Awaitable], deadline: Deadline) -> list[tuple[str, object]]:
        """(retriever name, reply) of ``call`` on every retriever, in parallel;
        the first failure is raised once all have finished."""
        results = await asyncio.gather(*(call(r, deadline.left(CALL_SECONDS)) for r in self.retrievers), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [(r.name, reply) for r, reply in zip(self.retrievers, results)]


def _add(into: types_pb2.DeletionCounts, more: types_pb2.DeletionCounts) -> None:
    for f in types_pb2.DeletionCounts.DESCRIPTOR.fields:
        setattr(into, f.name, getattr(into, f.name) + getattr(more, f.name))
