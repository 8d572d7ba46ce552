"""The MCP tools' mapping, without gRPC or MCP: tool arguments to gateway
requests, gateway replies to the tools' structured results (TypedDicts,
whose JSON schemas the MCP server publishes as each tool's output schema),
and a failed call to the message a model reads.

Every function here is pure; services/mcp_server/server.py calls the
gateway with what they build."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12 (output schemas)

import grpc
from grpc_status import rpc_status

from graphmesh.common.v1 import entity_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import InvalidArgument, field_violations
from services.common.names import STAGE_COLLECTIONS
from services.common.packed_context import source_label
from services.common.filters import parse_filter, to_proto

#: Characters of each search result's text returned (the rest is cut, marked "…").
MAX_RESULT_CHARS = 1200
#: Largest document ingest_text takes (characters); bigger ones: `graphmesh ingest`.
MAX_INGEST_CHARS = 1_000_000

# --- results -----------------------------------------------------------------


class SearchHit(TypedDict):
    """One piece of evidence."""

    number: int
    document_id: str
    collection: str
    label: str
    text: str
    score: float
    channels: list[str]
    metadata: dict[str, str]


class SearchResult(TypedDict):
    """Ranked evidence for a question."""

    results: list[SearchHit]
    question_type: str
    degraded: list[str]
    notes: list[str]


class Source(TypedDict):
    """A source an answer cites as [number] (or, for a no-answer, the nearest sources)."""

    number: int
    document_id: str
    label: str
    #: what to know before relying on it (a repealed law's "已废止"); "" when nothing
    caveat: str


class AnswerResult(TypedDict):
    """An answer with [n] citation marks and the sources they point at."""

    answer: str
    mode: str
    abstained: bool
    citations: list[Source]
    insufficient_sources: list[Source]
    unsupported_sentences: list[str]
    notes: list[str]


class Entity(TypedDict):
    """One library entity."""

    name: str
    category: str
    definition: str
    aliases: list[str]
    relation: str
    score: float


class EntitiesResult(TypedDict):
    """Library entities for a query, best first."""

    entities: list[Entity]
    normalized_query: str
    route: str
    degraded: list[str]


class Collection(TypedDict):
    """One collection and its counts."""

    name: str
    documents: int
    chunks: int
    entities: int
    domain_pack: str


class CollectionsResult(TypedDict):
    """Every collection."""

    collections: list[Collection]


class Document(TypedDict):
    """A stored document's record (its text is not returned; search finds its passages)."""

    name: str
    id: str
    collection: str
    title: str
    source: str
    heading_path: list[str]
    metadata: dict[str, str]
    chunk_count: int
    update_time_ms: int


class IngestResult(TypedDict):
    """What one ingest_text call stored."""

    document_id: str
    collection: str
    stored: bool
    unchanged: bool
    chunks: int
    failures: list[str]


class DeleteResult(TypedDict):
    """What one delete_document call deleted."""

    deleted_documents: int
    document_ids: list[str]


# --- descriptions ----------------------------------------------------------------

DESCRIPTIONS = {
    "search": (
        "Search the GraphMesh knowledge base (hybrid vector, keyword and knowledge-graph retrieval; Chinese first) "
        "and return ranked evidence passages with their document ids, titles/headings and scores. Use it to find "
        "sources; use `answer` for a written answer with citations."),
    "answer": (
        "Answer a question from the GraphMesh knowledge base. The answer cites its sources as [n] marks, listed in "
        "`citations`; when the sources do not answer the question the reply says so (`abstained` true, "
        "`insufficient_sources` lists the nearest ones) instead of guessing."),
    "search_entities": (
        "Find entities (named things of the entity library: terms, products, laws, people...) for a name, alias, "
        "misspelling or list of attributes, with category, definition and how each matched."),
    "list_collections": (
        "List the collections of the knowledge base with their document, chunk and entity counts and domain pack. "
        "Collection names are what the other tools' `collections` argument takes."),
    "get_document": (
        "Get one stored document's record (title, source, headings, metadata, chunk count) by its id, as "
        "returned by search or answer; the text itself is not returned."),
    "ingest_text": (
        "Store a text as a document in a collection (created when new), so that search and answer find it. "
        "Re-sending the same id with the same text changes nothing; a changed text replaces the document. "
        "Needs an API key with write access when the gateway requires keys."),
    "delete_document": (
        "Delete one stored document (its passages, vectors and graph nodes) by its id, from every store, so that "
        "search and answer no longer find it: an outdated version, or a text ingested by mistake. An id not stored "
        "deletes nothing (deleted_documents 0). Needs an API key with write access when the gateway requires keys."),
}

# --- requests ------------------------------------------------------------------------


def scope_fields(collections: list[str] | None, filter: str = "") -> dict:
    """The ``collections`` and ``filters`` request fields.

    Raises:
        InvalidArgument: the filter is not of the AIP-160 subset
            (services.common.filters.parse_filter), field "filter".
    """
    out: dict = {"collections": [c for c in (collections or []) if c.strip()]}
    if filter.strip():
        out["filters"] = to_proto(parse_filter(filter, "filter"))
    return out


def search_request(query: str, top_k: int = 5, collections: list[str] | None = None, filter: str = "") -> gateway_pb2.SearchRequest:
    """The SearchRequest of the search tool. Raises InvalidArgument (filter)."""
    return gateway_pb2.SearchRequest(query=query, top_k=top_k, **scope_fields(collections, filter))


def answer_request(query: str, top_k: int = 10, collections: list[str] | None = None, filter: str = "") -> gateway_pb2.AnswerRequest:
    """The AnswerRequest of the answer tool. Raises InvalidArgument (filter)."""
    return gateway_pb2.AnswerRequest(query=query, top_k=top_k, **scope_fields(collections, filter))


def document_name(document_id: str, collection: str = "-") -> str:
    """The AIP-122 name of a document: ``document_id`` itself when it is
    already "collections/{c}/documents/{id}", else built from ``collection``
    ("-" = any collection)."""
    if document_id.startswith("collections/"):
        return document_id
    return f"collections/{collection.strip() or '-'}/documents/{document_id}"


def ingest_request(text: str, document_id: str, collection: str = "default", title: str = "",
                   metadata: dict[str, str] | None = None) -> gateway_pb2.IngestRequest:
    """An IngestRequest holding one JSONL document record.

    Raises:
        InvalidArgument: ``text`` or ``document_id`` empty ("text",
            "document_id"), ``text`` over MAX_INGEST_CHARS, a metadata value
            that is neither a string nor a number ("metadata"; a number is stored as its text).
    """
    if not document_id.strip():
        raise InvalidArgument("document_id", "must not be empty")
    if not text.strip():
        raise InvalidArgument("text", "must not be empty")
    if len(text) > MAX_INGEST_CHARS:
        raise InvalidArgument("text", f"is {len(text)} characters; at most {MAX_INGEST_CHARS} (use `graphmesh ingest` for more)")
    record: dict = {"id": document_id.strip(), "text": text}
    if title.strip():
        record["title"] = title.strip()
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool)
                   for k, v in metadata.items()):
            raise InvalidArgument("metadata", "keys must be strings, values strings or numbers")
        record["metadata"] = {k: v if isinstance(v, str) else str(v) for k, v in metadata.items()}  # {"year": 2026}
    return gateway_pb2.IngestRequest(jsonl=json.dumps(record, ensure_ascii=False).encode("utf-8"),
                                     kind=gateway_pb2.INGEST_KIND_DOCUMENTS, collection=collection.strip())


def delete_request(document_id: str, collection: str = "-") -> gateway_pb2.DeleteDocumentsRequest:
    """A DeleteDocumentsRequest for one document (``document_name``) under ``collection`` ("-" = any).

    Raises:
        InvalidArgument: ``document_id`` empty ("document_id").
    """
    if not document_id.strip():
        raise InvalidArgument("document_id", "must not be empty")
    name = document_name(document_id.strip(), collection)
    return gateway_pb2.DeleteDocumentsRequest(parent=name.split("/documents/", 1)[0], names=[name])


# --- replies --------------------------------------------------------------------------


def _clip(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _label(cand) -> str:
    return source_label(cand).strip()


def _notes(reply: gateway_pb2.SearchResponse) -> list[str]:
    """What the search says of its scope: a named collection no store holds
    (the SKIPPED ``collections`` stage), so that an empty result can be told
    from a collection that does not exist."""
    return [t.detail for t in reply.timings if t.stage == STAGE_COLLECTIONS and t.detail]


def search_result(reply: gateway_pb2.SearchResponse) -> SearchResult:
    """A SearchResponse as the search tool's result (texts cut to MAX_RESULT_CHARS)."""
    return SearchResult(
        results=[SearchHit(number=n, document_id=c.document_id, collection=c.collection, label=_label(c), text=_clip(c.text),
                           score=round(c.fused_score, 6), channels=[s.channel for s in c.channel_scores],
                           metadata=dict(c.metadata))
                 for n, c in enumerate(reply.results, start=1)],
        question_type=reply.query_info.question_type, degraded=list(reply.degraded), notes=_notes(reply))


def _sources(citations) -> list[Source]:
    return [Source(number=c.number, document_id=c.document_id, label=c.label, caveat=c.caveat) for c in citations]


def answer_result(reply: gateway_pb2.AnswerResponse) -> AnswerResult:
    """An AnswerResponse as the answer tool's result."""
    mode = gateway_pb2.AnswerMode.Name(reply.mode).removeprefix("ANSWER_MODE_").lower()
    return AnswerResult(answer=reply.answer, mode=mode, abstained=reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED,
                        citations=_sources(reply.citations), insufficient_sources=_sources(reply.insufficient_sources),
                        unsupported_sentences=[u.sentence for u in reply.unsupported_sentences], notes=_notes(reply.search))


def entities_result(reply: gateway_pb2.SearchEntitiesResponse) -> EntitiesResult:
    """A SearchEntitiesResponse as the search_entities tool's result."""
    return EntitiesResult(
        entities=[Entity(name=e.name, category=e.category, definition=_clip(e.definition, 500), aliases=list(e.aliases),
                         relation=entity_pb2.EntityRelation.Name(e.relation).removeprefix("ENTITY_RELATION_").lower(),
                         score=round(e.score, 6))
                  for e in reply.entities],
        normalized_query=reply.normalized_query, route=reply.route, degraded=list(reply.degraded))


def collections_result(reply: gateway_pb2.ListCollectionsResponse) -> CollectionsResult:
    """A ListCollectionsResponse as the list_collections tool's result."""
    return CollectionsResult(collections=[Collection(name=c.name, documents=c.documents, chunks=c.chunks, entities=c.entities,
                                                     domain_pack=c.domain_pack) for c in reply.collections])


def document_result(reply: gateway_pb2.GetDocumentResponse) -> Document:
    """A GetDocumentResponse as the get_document tool's result."""
    d = reply.document
    return Document(name=d.name, id=d.id, collection=d.collection, title=d.title, source=d.source,
                    heading_path=list(d.heading_path), metadata=dict(d.metadata), chunk_count=d.chunk_count,
                    update_time_ms=int(d.update_time_ms))


def ingest_result(reply: gateway_pb2.IngestResponse, request: gateway_pb2.IngestRequest) -> IngestResult:
    """An IngestResponse (one record) as the ingest_text tool's result."""
    record = json.loads(request.jsonl)
    return IngestResult(document_id=record["id"], collection=request.collection or "default", stored=reply.stored > 0,
                        unchanged=reply.unchanged > 0, chunks=reply.chunks, failures=[f.reason for f in reply.failures])


# --- errors ------------------------------------------------------------------------------

#: What a model can do about each refusal.
_HINTS = {
    grpc.StatusCode.UNAUTHENTICATED: "the gateway requires an API key: start the MCP server with GRAPHMESH_API_KEY set",
    grpc.StatusCode.PERMISSION_DENIED: "the API key may not do this",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "rate limited: wait and try again",
    grpc.StatusCode.UNAVAILABLE: "the GraphMesh gateway cannot be reached (is it running? GRAPHMESH_GATEWAY_ADDR)",
    grpc.StatusCode.NOT_FOUND: "nothing is stored under that name",
}


#: The gateway's field names for the one JSONL record ingest_text sends -> the tool's own arguments (a trial's
#: agent was told of "jsonl[0].id", which it never wrote).
INGEST_TEXT_FIELDS = {"jsonl[0].id": "document_id", "jsonl[0].text": "text", "jsonl[0].title": "title",
                      "jsonl[0].metadata": "metadata", "jsonl[0]": "text"}


def _renamed(text: str, fields: Mapping[str, str]) -> str:
    for theirs in sorted(fields, key=len, reverse=True):  # jsonl[0].id before jsonl[0]
        text = text.replace(theirs, fields[theirs])
    return text


def error_message(err: grpc.RpcError, fields: Mapping[str, str] | None = None) -> str:
    """A failed gateway call as one line for the model: the status code,
    the gateway's message, each field at fault and what to do. ``fields``
    renames the request's fields to the tool's arguments
    (``INGEST_TEXT_FIELDS``)."""
    code = err.code()
    parts = [f"{code.name}: {err.details() or ''}".rstrip(": ")]
    if isinstance(err, grpc.aio.AioRpcError) and rpc_status.from_call(err) is not None:
        parts += [f"field {f}: {d}" for f, d in field_violations(err)]
    if code in _HINTS:
        parts.append(_HINTS[code])
    return _renamed("; ".join(dict.fromkeys(parts)), fields or {})


def delete_result(reply: gateway_pb2.DeleteDocumentsResponse) -> DeleteResult:
    """A DeleteDocumentsResponse as the delete_document tool's result."""
    return DeleteResult(deleted_documents=reply.deleted_documents, document_ids=list(reply.document_ids))
