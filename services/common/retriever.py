"""The one RetrieverService servicer both retrievers use, and the two
backend protocols a retriever implements.

A retriever supplies a ``RetrievalBackend`` (document channels, ingestion,
expansion terms) and an ``EntityBackend`` (entity library channels,
ingestion, the library itself), built by its async factory at startup.
This module validates requests, converts between protobuf and records, and
writes responses, so every retriever behaves the same at the contract
level. A backend method raising ``NotImplementedError`` makes its RPC
answer UNIMPLEMENTED (e.g. IngestTriples on retriever_pg).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from graphmesh.common.v1 import entity_pb2, types_pb2
from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common import filters as flt
from services.common import names
from services.common.convert import (chunked_document_to_record, deletion_to_proto, failures_to_proto, hits_to_candidates,
                                     stored_document_to_proto)
from services.common.cross_lingual import translation_from_message
from services.common.entity_convert import hits_to_candidates as entity_hits_to_candidates
from services.common.errors import InvalidArgument, validate_query, validate_range
from services.common.records import (Deletion, DocumentRecord, EntityExport, EntityHit, EntityRecord, ExpansionTerm, Hit, IngestResult,
                                     StoredDocumentInfo)

MAX_TOP_K = 200
MAX_HASH_IDS = 10_000
MAX_ENTITIES_PER_CALL = 10_000
MAX_TRIPLES_PER_CALL = 50_000
MAX_ATTRIBUTE_VALUES = 50
MAX_RESOLVED_NAMES = 20
MAX_CATEGORIES = 10
MAX_EXPANSION_KEYWORDS = 50
MAX_SEEDS = 50
#: Largest parent-context budget a Retrieve call may ask for (tokens).
MAX_PARENT_CONTEXT_TOKENS = 4096
MAX_LIST_IDS = 1_000
#: The gateway's largest page (1,000 documents, 10,000 entities) and one row more: it asks for one
#: row past its page to tell whether another page follows.
MAX_PAGE_SIZE = 1_001
DEFAULT_PAGE_SIZE = 100
#: Most documents a ListDocuments page holds when their chunks come with them (with_chunks).
MAX_CHUNKED_DOCUMENTS = 10
MAX_DELETE_IDS = 10_000
MAX_EDIT_NAMES = 1_000
MAX_EXPORT_PAGE = 10_001
DEFAULT_EXPORT_PAGE = 1_000
MAX_DELETE_TRIPLES = 10_000


@dataclass(slots=True)
class RetrievalQuery:
    """One retrieval request as the backends see it.

    Attributes:
        query: normalised query text.
        keywords: keyword terms (expander output, expansions included).
        embedding: query embedding; empty skips vector channels.
        hyde_embedding: HyDE passage embedding; empty when none.
        adapted_embedding: the query embedding mapped by the domain pack's
            query adapter (channel pg.adapted); empty when none.
        top_k: candidates wanted per channel.
        disabled: channel names switched off for this request (not run).
        collections: collections searched (validated, never empty).
        filters: metadata conditions every candidate's document must meet,
            applied inside each channel's query before its top_k.
        parent_context_tokens: token budget of the top hits' parent context
            (Hit.context_text); 0 = none.
        with_embeddings: whether hits carry their stored chunk embedding
            (Hit.embedding, embedding_dim floats; only the fuser's MMR reads
            it); False: a backend may leave it empty and skip reading it.
        translated_script / translated_words: the query's words in the
            other writing system (RetrieveRequest.translation: "latin" or
            "cjk", and (word, its terms, its synonyms)); "" and [] when none.
    """

    query: str
    keywords: list[str]
    embedding: list[float]
    top_k: int
    hyde_embedding: list[float] = field(default_factory=list)
    adapted_embedding: list[float] = field(default_factory=list)
    disabled: frozenset[str] = frozenset()
    collections: list[str] = field(default_factory=lambda: [flt.DEFAULT_COLLECTION])
    filters: list[flt.Condition] = field(default_factory=list)
    parent_context_tokens: int = 0
    with_embeddings: bool = False
    translated_script: str = ""
    translated_words: list[tuple[str, list[str], list[str]]] = field(default_factory=list)

    def enabled(self, channel: str) -> bool:
        """Whether ``channel`` may run for this request."""
        return channel not in self.disabled


@dataclass(slots=True)
class SeedRecord:
    """A first-stage hit a Related call starts from (see the Seed message)."""

    document_id: str
    chunk_id: str = ""
    score: float = 0.0


@dataclass(slots=True)
class RelatedQuery:
    """One Related request as the backends see it.

    Attributes:
        query / keywords / top_k / disabled: as in RetrievalQuery.
        seeds: first-stage hits, best first.
        collections / filters: as in RetrievalQuery; no related candidate
            outside them is returned.
    """

    query: str
    keywords: list[str]
    seeds: list[SeedRecord]
    top_k: int
    disabled: frozenset[str] = frozenset()
    collections: list[str] = field(default_factory=lambda: [flt.DEFAULT_COLLECTION])
    filters: list[flt.Condition] = field(default_factory=list)

    def enabled(self, channel: str) -> bool:
        """Whether ``channel`` may run for this request."""
        return channel not in self.disabled


@dataclass(slots=True)
class EntityQuery:
    """One RetrieveEntities request as the backends see it (see
    RetrieveEntitiesRequest for each field)."""

    query: str
    top_k: int
    resolved_names: list[str] = field(default_factory=list)
    attribute_values: list[str] = field(default_factory=list)
    attribute_label: str = ""
    categories: list[str] = field(default_factory=list)
    query_embedding: list[float] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    collections: list[str] = field(default_factory=lambda: [flt.DEFAULT_COLLECTION])


@dataclass(slots=True)
class EntityRetrieval:
    """What an EntityBackend found: hits of every channel, each channel's
    timing, and summaries of the categories the query names."""

    hits: list[EntityHit]
    timings: list[types_pb2.StageTiming]
    summaries: list[entity_pb2.CategorySummary] = field(default_factory=list)


@dataclass(slots=True)
class LibrarySnapshot:
    """The entity library at one version; ``entries`` is None when the
    caller already holds that version. Entries: (name, category, aliases)."""

    version: int
    entries: list[tuple[str, str, list[str]]] | None


class RetrievalBackend(Protocol):
    """Document retrieval of one retriever.

    ``source_by_channel`` maps each channel the backend emits to the context
    source its candidates are packed under, in priority order.
    """

    source_by_channel: dict[str, int]

    async def retrieve(self, request: RetrievalQuery) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        """Hits of every enabled channel, each channel's hits best first; a
        disabled channel is not run."""
        ...

    async def script_centroids(self, collections: list[str]) -> dict[str, Any]:
        """{writing system: mean chunk embedding} of ``collections``, which
        channel pg.centred was scored with; asked only of a backend that
        returned pg.centred hits (retriever_pg)."""
        ...

    async def ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult:
        """Stores ``docs`` (idempotent by content hash)."""
        ...

    async def document_hashes(self, ids: list[str]) -> dict[str, str]:
        """Stored content hash of each known id."""
        ...

    async def documents_by_text_digest(self, collection: str, digests: list[str]) -> dict[str, str]:
        """{digest: id of a stored document of ``collection`` with that text
        digest} for the ``digests`` found ({} from a store that keeps none)."""
        ...

    async def documents_by_title(self, collection: str, titles: list[str]) -> list[tuple[str, str]]:
        """(title, id) of the stored documents of ``collection`` with one of ``titles`` ([] from a store that
        keeps none)."""
        ...

    async def suggest_expansions(self, keywords: list[str], limit: int, collections: list[str]) -> list[ExpansionTerm]:
        """Expansion terms for ``keywords`` from ``collections``; NotImplementedError if not offered."""
        ...

    async def list_documents(self, ids: list[str], collections: list[str] | None, filters: list[flt.Condition],
                             page_size: int, after_id: str, with_chunks: bool = False) -> list[StoredDocumentInfo]:
        """Stored documents ordered by id, at most ``page_size``, ids after
        ``after_id``: those of ``ids`` when given, else those of
        ``collections`` (None = all) meeting ``filters``; ``with_chunks``:
        each with its chunks in reading order, when the store keeps them."""
        ...

    async def delete_documents(self, ids: list[str], collections: list[str] | None,
                               filters: list[flt.Condition]) -> Deletion:
        """Deletes the documents of ``ids`` (or of ``collections`` meeting
        ``filters``) and everything only they support, in transactions of
        at most DELETE_BATCH documents (StoreLifecycle)."""
        ...

    async def collection_counts(self) -> dict[str, tuple[int, int]]:
        """{collection: (documents, chunks)} of every collection holding documents."""
        ...

    async def collection_packs(self) -> dict[str, str]:
        """{collection: domain pack} of the collections this store records
        a pack for ({} when it keeps none)."""
        ...

    async def related(self, request: RelatedQuery) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        """Hits related to the request's seeds, of every enabled related
        channel; NotImplementedError if the retriever has none."""
        ...


#: Documents deleted in one store transaction. A whole collection at once (the law corpus, 26,196
#: documents) ran PostgreSQL out of lock slots (one advisory lock a document: max_locks_per_transaction)
#: and Neo4j out of heap, and nothing was deleted.
DELETE_BATCH = 1000


class StoreLifecycle:
    """The lifecycle half of a RetrievalBackend, handed to ``self.store``
    unchanged: both stores list, delete and count documents with the same
    signatures (see RetrievalBackend for shapes and errors). Deletion goes
    DELETE_BATCH documents a store transaction."""

    store: Any

    async def list_documents(self, ids: list[str], collections: list[str] | None, filters: list[flt.Condition],
                             page_size: int, after_id: str, with_chunks: bool = False) -> list[StoredDocumentInfo]:
        return await self.store.list_documents(ids, collections, filters, page_size, after_id, with_chunks)

    async def delete_documents(self, ids: list[str], collections: list[str] | None, filters: list[flt.Condition]) -> Deletion:
        """Deletes ``ids`` DELETE_BATCH at a time; without ids, the scope's
        documents page by page (in id order), then the scope once more, which
        deletes what was written meanwhile and lets the store forget an
        emptied collection. A failure leaves the batches before it deleted;
        deleting again finishes the job (deletion is idempotent)."""
        total = Deletion()
        if ids:
            for start in range(0, len(ids), DELETE_BATCH):
                total.add(await self.store.delete_documents(ids[start:start + DELETE_BATCH], collections, filters))
            return total
        after = ""
        while page := await self.list_documents([], collections, filters, DELETE_BATCH, after):
            total.add(await self.store.delete_documents([d.id for d in page], collections, filters))
            after = page[-1].id
        return total.add(await self.store.delete_documents([], collections, filters))

    async def collection_counts(self) -> dict[str, tuple[int, int]]:
        return await self.store.collection_counts()

    async def collection_packs(self) -> dict[str, str]:
        packs = getattr(self.store, "collection_packs", None)
        return await packs() if packs is not None else {}

    async def documents_by_text_digest(self, collection: str, digests: list[str]) -> dict[str, str]:
        lookup = getattr(self.store, "documents_by_text_digest", None)
        return await lookup(collection, digests) if lookup is not None else {}

    async def documents_by_title(self, collection: str, titles: list[str]) -> list[tuple[str, str]]:
        lookup = getattr(self.store, "documents_by_title", None)
        return await lookup(collection, titles) if lookup is not None else []


class EntityBackend(Protocol):
    """Entity-library retrieval of one retriever; a method it does not
    offer raises NotImplementedError."""

    async def ingest_entities(self, entities: list[EntityRecord], collection: str, replace: bool = False) -> IngestResult:
        """Stores ``entities`` in ``collection`` merged by name; ``unchanged``
        counts those whose stored content was the same. With ``replace``
        each takes exactly the given fields (see IngestEntitiesRequest)."""
        ...

    async def export_entities(self, collection: str, names: list[str], page_size: int, after: str,
                              with_links: bool) -> EntityExport:
        """The named entities (or a page of them after ``after``) with their
        facts (see ExportEntitiesRequest)."""
        ...

    async def remove_entities(self, collection: str, names: list[str]) -> tuple[Deletion, list[str]]:
        """Deletes the named entities with every edge touching them;
        returns (counts, names removed)."""
        ...

    async def delete_triples(self, triples: list[tuple[str, str, str]], collection: str) -> int:
        """Deletes the given facts of ``collection``; returns how many went."""
        ...

    async def ingest_triples(self, triples: list[tuple[str, str, str]], collection: str) -> tuple[int, list[tuple[int, str]]]:
        """Stores (subject, predicate, object) facts of ``collection``;
        returns (stored, [(index, reason) of rejected triples])."""
        ...

    async def entity_counts(self) -> dict[str, int]:
        """{collection: library entities} of every collection holding entities."""
        ...

    async def delete_entities(self, collection: str) -> Deletion:
        """Deletes the library entities and facts of ``collection``."""
        ...

    async def retrieve_entities(self, query: EntityQuery) -> EntityRetrieval:
        """Entities of every channel for ``query``."""
        ...

    async def entity_library(self, known_version: int | None) -> LibrarySnapshot:
        """The library's version and, unless ``known_version`` equals it, its entries."""
        ...


def timing(stage: str, started: float, status: int = types_pb2.STAGE_STATUS_OK, detail: str = "") -> types_pb2.StageTiming:
    """A StageTiming from a perf_counter start."""
    return types_pb2.StageTiming(stage=stage, duration_ms=(time.perf_counter() - started) * 1000, status=status, detail=detail)


def entity_record(e: entity_pb2.Entity, surfaces: retriever_pb2.EntitySurfaceEmbeddings | None) -> EntityRecord:
    """EntityRecord of a protobuf Entity and its surface embeddings."""
    return EntityRecord(
        name=e.name.strip(), category=e.category.strip(), definition=e.definition, aliases=list(e.aliases),
        parents=list(e.parents), attributes=dict(e.attributes),
        surface_embeddings=[list(v.values) for v in surfaces.surfaces] if surfaces is not None else [],
    )


class RetrieverServicer(retriever_pb2_grpc.RetrieverServiceServicer):
    """RetrieverService over a retriever's two backends.

    Args:
        backend: document retrieval.
        entities: entity-library retrieval.
        max_query_chars: longest accepted query (characters).
    """

    def __init__(self, backend: RetrievalBackend, entities: EntityBackend, max_query_chars: int) -> None:
        self._backend = backend
        self._entities = entities
        self._max_query_chars = max_query_chars

    async def Retrieve(self, request: retriever_pb2.RetrieveRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.RetrieveResponse:
        query = validate_query(request.query, self._max_query_chars)
        top_k = validate_range(request.top_k or 20, 1, MAX_TOP_K, "top_k")
        translated_script, translated_words = translation_from_message(request.translation)
        collections = flt.validate_collections(request.collections)
        hits, timings = await self._backend.retrieve(RetrievalQuery(
            query=query, keywords=list(request.keywords), embedding=list(request.query_embedding), top_k=top_k,
            hyde_embedding=list(request.hyde_embedding), adapted_embedding=list(request.adapted_embedding),
            disabled=frozenset(request.disabled_channels),
            collections=collections, filters=flt.from_proto(request.filters),
            parent_context_tokens=validate_range(request.parent_context_tokens, 0, MAX_PARENT_CONTEXT_TOKENS,
                                                 "parent_context_tokens"),
            with_embeddings=request.with_embeddings, translated_script=translated_script,
            translated_words=translated_words,
        ))
        candidates = hits_to_candidates(hits, self._backend.source_by_channel, with_embeddings=request.with_embeddings)
        reply = retriever_pb2.RetrieveResponse(candidates=candidates, timings=timings)
        if any(h.channel == names.PG_CENTRED for h in hits):
            # only retriever_pg emits the channel, and it has the centroids the channel was scored with
            centroids = await self._backend.script_centroids(collections)
            reply.script_centroids.extend(retriever_pb2.ScriptCentroid(script=script, values=vector.tolist())
                                          for script, vector in sorted(centroids.items()))
        return reply

    async def IngestDocuments(self, request: retriever_pb2.IngestDocumentsRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.IngestDocumentsResponse:
        if not request.documents:
            raise InvalidArgument("documents", "must not be empty")
        result = await self._backend.ingest_documents([chunked_document_to_record(d) for d in request.documents])
        return retriever_pb2.IngestDocumentsResponse(stored=result.stored, unchanged=result.unchanged, failures=failures_to_proto(result.failures))

    async def GetDocumentHashes(self, request: retriever_pb2.GetDocumentHashesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.GetDocumentHashesResponse:
        if len(request.document_ids) > MAX_HASH_IDS:
            raise InvalidArgument("document_ids", f"at most {MAX_HASH_IDS} ids per call")
        if len(request.text_digests) > MAX_HASH_IDS:
            raise InvalidArgument("text_digests", f"at most {MAX_HASH_IDS} digests per call")
        reply = retriever_pb2.GetDocumentHashesResponse(content_hashes=await self._backend.document_hashes(list(request.document_ids)))
        if len(request.titles) > MAX_HASH_IDS:
            raise InvalidArgument("titles", f"at most {MAX_HASH_IDS} titles per call")
        if request.text_digests or request.titles:
            collection = flt.validate_collection(request.collection)
        if request.text_digests:
            reply.documents_by_text_digest.update(
                await self._backend.documents_by_text_digest(collection, list(request.text_digests)))
        if request.titles:
            reply.documents_by_title.extend(
                retriever_pb2.TitledDocument(title=title, document_id=doc_id)
                for title, doc_id in await self._backend.documents_by_title(collection, list(request.titles)))
        return reply

    async def SuggestExpansions(self, request: retriever_pb2.SuggestExpansionsRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.SuggestExpansionsResponse:
        if not request.keywords:
            raise InvalidArgument("keywords", "must not be empty")
        if len(request.keywords) > MAX_EXPANSION_KEYWORDS:
            raise InvalidArgument("keywords", f"at most {MAX_EXPANSION_KEYWORDS} keywords")
        if not 0 <= request.limit <= 50:
            raise InvalidArgument("limit", "must be in 0..50")
        found = await self._backend.suggest_expansions(list(request.keywords), request.limit or 15,
                                                       flt.validate_collections(request.collections))
        return retriever_pb2.SuggestExpansionsResponse(
            expansions=[retriever_pb2.QueryExpansion(text=e.text, origin=e.origin, matched=e.matched) for e in found])

    async def IngestEntities(self, request: retriever_pb2.IngestEntitiesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.IngestEntitiesResponse:
        if not request.entities:
            raise InvalidArgument("entities", "must not be empty")
        if len(request.entities) > MAX_ENTITIES_PER_CALL:
            raise InvalidArgument("entities", f"at most {MAX_ENTITIES_PER_CALL} entities per call")
        if request.surface_embeddings and len(request.surface_embeddings) != len(request.entities):
            raise InvalidArgument("surface_embeddings", "must be empty or one entry per entity")
        surfaces = list(request.surface_embeddings) or [None] * len(request.entities)
        records = [entity_record(e, s) for e, s in zip(request.entities, surfaces)]
        if not any(r.name for r in records):
            raise InvalidArgument("entities[0].name", "must not be blank")
        result = await self._entities.ingest_entities(records, flt.validate_collection(request.collection), request.replace)
        return retriever_pb2.IngestEntitiesResponse(stored=result.stored, unchanged=result.unchanged, failures=failures_to_proto(result.failures))

    async def IngestTriples(self, request: retriever_pb2.IngestTriplesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.IngestTriplesResponse:
        if not request.triples:
            raise InvalidArgument("triples", "must not be empty")
        if len(request.triples) > MAX_TRIPLES_PER_CALL:
            raise InvalidArgument("triples", f"at most {MAX_TRIPLES_PER_CALL} triples per call")
        stored, failures = await self._entities.ingest_triples([(t.subject, t.predicate, t.object) for t in request.triples],
                                                               flt.validate_collection(request.collection))
        return retriever_pb2.IngestTriplesResponse(
            stored=stored, failures=[types_pb2.IngestFailure(index=i, id=request.triples[i].subject, reason=r) for i, r in failures])

    async def RetrieveEntities(self, request: retriever_pb2.RetrieveEntitiesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.RetrieveEntitiesResponse:
        query = validate_query(request.query, self._max_query_chars)
        top_k = validate_range(request.top_k or 20, 1, MAX_TOP_K, "top_k")
        if len(request.attribute_values) > MAX_ATTRIBUTE_VALUES:
            raise InvalidArgument("attribute_values", f"at most {MAX_ATTRIBUTE_VALUES} values")
        found = await self._entities.retrieve_entities(EntityQuery(
            query=query, top_k=top_k, resolved_names=list(request.resolved_names)[:MAX_RESOLVED_NAMES],
            attribute_values=list(request.attribute_values), attribute_label=request.attribute_label,
            categories=list(request.categories)[:MAX_CATEGORIES], query_embedding=list(request.query_embedding),
            keywords=list(request.keywords), collections=flt.validate_collections(request.collections),
        ))
        return retriever_pb2.RetrieveEntitiesResponse(
            candidates=entity_hits_to_candidates(found.hits), timings=found.timings, category_summaries=found.summaries)

    async def Related(self, request: retriever_pb2.RelatedRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.RelatedResponse:
        query = validate_query(request.query, self._max_query_chars)
        if not request.seeds:
            raise InvalidArgument("seeds", "must not be empty")
        if len(request.seeds) > MAX_SEEDS:
            raise InvalidArgument("seeds", f"at most {MAX_SEEDS} seeds")
        if any(not s.document_id for s in request.seeds):
            raise InvalidArgument("seeds", "every seed needs a document_id")
        top_k = validate_range(request.top_k or 20, 1, MAX_TOP_K, "top_k")
        hits, timings = await self._backend.related(RelatedQuery(
            query=query, keywords=list(request.keywords),
            seeds=[SeedRecord(s.document_id, s.chunk_id, s.score) for s in request.seeds], top_k=top_k,
            disabled=frozenset(request.disabled_channels),
            collections=flt.validate_collections(request.collections), filters=flt.from_proto(request.filters),
        ))
        return retriever_pb2.RelatedResponse(candidates=hits_to_candidates(hits, self._backend.source_by_channel), timings=timings)

    async def GetEntityLibrary(self, request: retriever_pb2.GetEntityLibraryRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.GetEntityLibraryResponse:
        known = request.known_version if request.HasField("known_version") else None
        snapshot = await self._entities.entity_library(known)
        if snapshot.entries is None:
            return retriever_pb2.GetEntityLibraryResponse(version=snapshot.version, unchanged=True)
        return retriever_pb2.GetEntityLibraryResponse(version=snapshot.version, entries=[
            retriever_pb2.LibraryEntry(name=n, category=c, aliases=a) for n, c, a in snapshot.entries])

    async def ExportEntities(self, request: retriever_pb2.ExportEntitiesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.ExportEntitiesResponse:
        if len(request.names) > MAX_EDIT_NAMES:
            raise InvalidArgument("names", f"at most {MAX_EDIT_NAMES} names per call")
        page_size = validate_range(request.page_size or DEFAULT_EXPORT_PAGE, 1, MAX_EXPORT_PAGE, "page_size")
        found = await self._entities.export_entities(flt.validate_collection(request.collection), _names(request.names),
                                                     page_size, request.after_name, request.with_links)
        return retriever_pb2.ExportEntitiesResponse(
            entities=[entity_proto(e) for e in found.entities], children=[entity_proto(e) for e in found.children],
            triples=[entity_pb2.Triple(subject=s, predicate=p, object=o) for s, p, o in found.triples])

    async def DeleteEntities(self, request: retriever_pb2.DeleteEntitiesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.DeleteEntitiesResponse:
        names = _names(request.names)
        if not names:
            raise InvalidArgument("names", "must name at least one entity")
        if len(names) > MAX_EDIT_NAMES:
            raise InvalidArgument("names", f"at most {MAX_EDIT_NAMES} names per call")
        deleted, removed = await self._entities.remove_entities(flt.validate_collection(request.collection), names)
        return retriever_pb2.DeleteEntitiesResponse(deleted=deletion_to_proto(deleted), names=removed)

    async def DeleteTriples(self, request: retriever_pb2.DeleteTriplesRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.DeleteTriplesResponse:
        if not request.triples:
            raise InvalidArgument("triples", "must not be empty")
        if len(request.triples) > MAX_DELETE_TRIPLES:
            raise InvalidArgument("triples", f"at most {MAX_DELETE_TRIPLES} triples per call")
        triples = [(t.subject.strip(), t.predicate.strip(), t.object.strip()) for t in request.triples]
        for i, triple in enumerate(triples):
            if not all(triple):
                raise InvalidArgument(f"triples[{i}]", "subject, predicate and object must not be blank")
        deleted = await self._entities.delete_triples(triples, flt.validate_collection(request.collection))
        return retriever_pb2.DeleteTriplesResponse(deleted=deleted)

    async def ListDocuments(self, request: retriever_pb2.ListDocumentsRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.ListDocumentsResponse:
        if len(request.ids) > MAX_LIST_IDS:
            raise InvalidArgument("ids", f"at most {MAX_LIST_IDS} ids per call")
        most = MAX_CHUNKED_DOCUMENTS if request.with_chunks else MAX_PAGE_SIZE
        page_size = validate_range(request.page_size or min(DEFAULT_PAGE_SIZE, most), 1, most, "page_size")
        collections = flt.validate_collections(request.collections) if request.collections else None
        found = await self._backend.list_documents(list(request.ids), collections, flt.from_proto(request.filters),
                                                   page_size, request.after_id, request.with_chunks)
        return retriever_pb2.ListDocumentsResponse(documents=[stored_document_to_proto(d) for d in found])

    async def DeleteDocuments(self, request: retriever_pb2.DeleteDocumentsRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.DeleteDocumentsResponse:
        if len(request.ids) > MAX_DELETE_IDS:
            raise InvalidArgument("ids", f"at most {MAX_DELETE_IDS} ids per call")
        if not request.ids and not request.collections:
            raise InvalidArgument("ids", "give document ids, or collections (and filters) to delete from")
        collections = flt.validate_collections(request.collections) if request.collections else None
        deleted = await self._backend.delete_documents(list(request.ids), collections, flt.from_proto(request.filters))
        return retriever_pb2.DeleteDocumentsResponse(deleted=deletion_to_proto(deleted), document_ids=deleted.document_ids)

    async def ListCollections(self, request: retriever_pb2.ListCollectionsRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.ListCollectionsResponse:
        documents = await self._backend.collection_counts()
        packs = await self._backend.collection_packs()
        entities = await _unless_unimplemented(self._entities.entity_counts(), {})
        names = sorted(set(documents) | set(entities))
        return retriever_pb2.ListCollectionsResponse(collections=[
            types_pb2.CollectionInfo(name=n, documents=documents.get(n, (0, 0))[0], chunks=documents.get(n, (0, 0))[1],
                                     entities=entities.get(n, 0), domain_pack=packs.get(n, ""))
            for n in names])

    async def DeleteCollection(self, request: retriever_pb2.DeleteCollectionRequest, context: grpc.aio.ServicerContext) -> retriever_pb2.DeleteCollectionResponse:
        if not request.name.strip():
            raise InvalidArgument("name", "must name a collection")
        name = flt.validate_collection(request.name, "name")
        deleted = await self._backend.delete_documents([], [name], [])
        deleted.add(await _unless_unimplemented(self._entities.delete_entities(name), Deletion()))
        return retriever_pb2.DeleteCollectionResponse(deleted=deletion_to_proto(deleted))


def _names(names) -> list[str]:
    """Distinct non-blank names, stripped, in order."""
    return list(dict.fromkeys(n.strip() for n in names if n.strip()))


def entity_proto(e: EntityRecord) -> entity_pb2.Entity:
    """Protobuf Entity of an EntityRecord (its embeddings left out)."""
    return entity_pb2.Entity(name=e.name, category=e.category, definition=e.definition, aliases=e.aliases,
                             parents=e.parents, attributes=e.attributes)


async def _unless_unimplemented(coro, default):
    """``await coro``, or ``default`` when the backend does not offer it."""
    try:
        return await coro
    except NotImplementedError:
        return default
