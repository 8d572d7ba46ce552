"""Document ingestion through the gateway: parse (JSONL records here, files
in ``file_ingest``), skip documents whose content hash every retriever
already holds, chunk, embed (expander), and store in every retriever, all
in one collection, then embed the stored chunks' sentences ahead of
questions (``IngestSettings.sentence_vectors``; by default in the
background once no ingest runs, ``sentence_backfill``). A record that cannot be
read, or that a retriever refuses, is reported in ``failures``; the others
are stored."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prometheus_client import Counter

import domains
from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common.errors import DownstreamError, InvalidArgument
from services.common.filters import DEFAULT_COLLECTION
from services.common.records import DocumentRecord
from services.gateway.search.collection_packs import CollectionPacks
from services.gateway.library.sentence_backfill import SentenceBackfill
from services.gateway.library.store_everywhere import BULK_CALL_SECONDS, store_in_every_retriever
from services.gateway.search.sentence_maxsim import chunk_units
from services.ingest.chunking import ChunkingConfig, chunk_document, embedding_text, record_to_chunked_document
from services.gateway.downstream.interfaces import Expander, Retriever
from services.gateway.config import GatewaySettings
from services.gateway.downstream.guard import Deadline, Trace
from services.ingest.jsonl_documents import ParsedDocument, ParseFailure, parse_jsonl


INGEST_RECORDS = Counter(
    "graphmesh_ingest_records_total", "Records ingested through the gateway, by kind and outcome (stored, unchanged, failed).",
    ("kind", "outcome"))


def count_ingest(kind: str, response: gateway_pb2.IngestResponse) -> None:
    """Adds one Ingest call's outcome to graphmesh_ingest_records_total."""
    INGEST_RECORDS.labels(kind, "stored").inc(response.stored)
    INGEST_RECORDS.labels(kind, "unchanged").inc(response.unchanged)
    INGEST_RECORDS.labels(kind, "failed").inc(len(response.failures))


def latest_records(docs: Sequence[ParsedDocument]) -> list[ParsedDocument]:
    """One document per id, the last record of each id winning (in the
    order ids first appear)."""
    return list({d.id: d for d in docs}.values())


def superseded_failures(docs: Sequence[ParsedDocument]) -> list[types_pb2.IngestFailure]:
    """An IngestFailure for each record of ``docs`` that a later record of
    its id replaces (``latest_records`` keeps the last): a trial's repeated
    id silently dropped the earlier record, and received no longer equalled
    stored + unchanged + failed."""
    last = {d.id: d.index for d in docs}
    return [types_pb2.IngestFailure(index=d.index, id=d.id, reason=f"id {d.id!r} is repeated by a later record, which is the one stored")
            for d in docs if last[d.id] != d.index]


def unreadable_payload(response: gateway_pb2.IngestResponse, parse_failures: Sequence[ParseFailure]) -> InvalidArgument | None:
    """The error of a payload none of whose records could be read (naming
    the first one's line and field), None when some could."""
    if not response.received or len(parse_failures) != response.received:
        return None
    first = parse_failures[0]
    field = f"jsonl[{first.index}]" + (f".{first.field}" if first.field else "")
    return InvalidArgument(field, first.reason + ("" if len(parse_failures) == 1 else f" (and {len(parse_failures) - 1} more records)"))


def failure_proto(f: ParseFailure) -> types_pb2.IngestFailure:
    """The IngestFailure of a record that could not be read."""
    return types_pb2.IngestFailure(index=f.index, id=f.id, reason=f"{f.field + ': ' if f.field else ''}{f.reason}")


@dataclass
class Stored:
    """What storing a set of documents came to.

    Attributes:
        stored: ids written (new or changed) by every retriever.
        unchanged: ids every retriever already held with the same hash.
        failed: {id: reason} of documents some retriever did not store.
        chunks: chunks written for the stored documents.
    """

    stored: list[str] = field(default_factory=list)
    unchanged: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    chunks: int = 0


class DocumentIngest:
    """Ingest of INGEST_KIND_DOCUMENTS.

    Args:
        settings: chunk sizes and the embedding batch size.
        expander: embeds the chunks (passage side).
        retrievers: every retriever; each stores every document.
        packs: the collections' domain packs (default: asked of ``retrievers``).
        searches_in_flight: searches running in the gateway; the background
            sentence worker waits while there are any.
    """

    def __init__(self, settings: GatewaySettings, expander: Expander, retrievers: Sequence[Retriever],
                 packs: CollectionPacks | None = None, searches_in_flight: Callable[[], int] = lambda: 0) -> None:
        self.settings = settings
        self.expander = expander
        self.retrievers = list(retrievers)
        self.packs = packs or CollectionPacks(self.retrievers)
        self.backfill = SentenceBackfill(expander, settings.ingest.embed_batch,
                                         idle_seconds=settings.ingest.sentence_vectors_idle_seconds,
                                         searches_in_flight=searches_in_flight)

    async def shut_down(self) -> None:
        """Stops the background sentence worker (what it has not embedded is
        left to the questions)."""
        await self.backfill.close()

    @property
    def chunking(self) -> ChunkingConfig:
        """The configured chunk sizes (tokens)."""
        return ChunkingConfig(self.settings.ingest.chunk_tokens, self.settings.ingest.chunk_overlap)

    def chunking_for(self, pack: str) -> ChunkingConfig:
        """The chunk sizes of a collection of domain pack ``pack``: the
        pack's recipe (e.g. generic's small chunks), unless the operator set
        GRAPHMESH_GATEWAY_INGEST__CHUNK_TOKENS / _CHUNK_OVERLAP, which win."""
        recipe = domains.get_pack(pack)
        explicit = self.settings.ingest.model_fields_set
        tokens = self.settings.ingest.chunk_tokens if "chunk_tokens" in explicit or recipe.chunk_tokens is None else recipe.chunk_tokens
        overlap = (self.settings.ingest.chunk_overlap if "chunk_overlap" in explicit or recipe.chunk_overlap is None
                   else recipe.chunk_overlap)
        return ChunkingConfig(tokens, min(overlap, tokens // 2))

    async def ingest(self, payload: bytes, deadline: Deadline, collection: str = DEFAULT_COLLECTION,
                     domain_pack: str = "") -> tuple[gateway_pb2.IngestResponse, list[ParseFailure]]:
        """Parses and stores ``payload`` (JSONL documents) in ``collection``,
        whose domain pack is ``domain_pack`` (CollectionPacks.for_ingest).

        Returns:
            the response and the records that could not be read (so the
            servicer can reject a payload with no readable record).
        Raises:
            InvalidArgument ("domain_pack"): see CollectionPacks.for_ingest.
            DownstreamError: a retriever could not be asked for its hashes,
                or the expander could not embed.
        """
        pack = await self.packs.for_ingest(collection, domain_pack, deadline)
        trace = Trace()
        started = time.perf_counter()
        docs, parse_failures = parse_jsonl(payload)
        response = gateway_pb2.IngestResponse(received=len(docs) + len(parse_failures))
        response.failures.extend(failure_proto(f) for f in parse_failures)
        trace.record(names.STAGE_PARSE, started)
        if not docs:
            return response, parse_failures
        response.failures.extend(superseded_failures(docs))
        await self.store_parsed(latest_records(docs), pack, collection, deadline, trace, response)
        response.timings.extend(trace.timings)
        return response, parse_failures

    async def store_parsed(self, docs: Sequence[ParsedDocument], pack: str, collection: str, deadline: Deadline, trace: Trace,
                           response: gateway_pb2.IngestResponse) -> None:
        """Chunks and stores parsed documents (ids distinct) of domain pack
        ``pack`` in ``collection``, adding to ``response``'s stored,
        unchanged and chunk counts and its failures (ImportDocuments calls
        it once per batch).

        Raises:
            DownstreamError: see ``store``.
        """
        chunking = self.chunking_for(pack)
        records = {d.id: chunk_document(d.id, d.title, d.heading_path, d.text, d.metadata, chunking, collection) for d in docs}
        for record in records.values():
            record.domain_pack = pack
        outcome = await self.store(records, {d.id: d.text for d in docs}, deadline, trace)
        index_of = {d.id: d.index for d in docs}
        response.unchanged += len(outcome.unchanged)
        response.stored += len(outcome.stored)
        response.chunks += outcome.chunks
        response.failures.extend(types_pb2.IngestFailure(index=index_of[i], id=i, reason=r) for i, r in outcome.failed.items())

    async def store(self, records: dict[str, DocumentRecord], text_of: dict[str, str], deadline: Deadline,
                    trace: Trace) -> Stored:
        """Skips the unchanged, embeds and stores the others in every
        retriever, then embeds the stored chunks' sentences (stages
        hash_check, embed, store, sentence_vectors).

        Raises:
            DownstreamError: hashes could not be read or the expander failed.
        """
        with self.backfill.busy():
            outcome = await self._store_records(records, text_of, deadline, trace)
        for collection in {records[i].collection for i in [*outcome.stored, *outcome.unchanged]}:
            self.packs.stored(collection)
        return outcome

    async def _store_records(self, records: dict[str, DocumentRecord], text_of: dict[str, str], deadline: Deadline,
                             trace: Trace) -> Stored:
        started = time.perf_counter()
        unchanged, known = await self._unchanged(records, deadline)
        outcome = Stored(unchanged=unchanged)
        todo = [records[i] for i in records if i not in outcome.unchanged]
        trace.record(names.STAGE_HASH_CHECK, started)
        if todo:
            started = time.perf_counter()
            await self._embed(todo, deadline)
            trace.record(names.STAGE_EMBED, started)
            started = time.perf_counter()
            outcome.failed = await self._store(todo, text_of, deadline, known)
            trace.record(names.STAGE_STORE, started)
            outcome.stored = [r.id for r in todo if r.id not in outcome.failed]
            outcome.chunks = sum(len(r.chunks) for r in todo if r.id not in outcome.failed)
            if self.settings.ingest.sentence_vectors:
                await self._embed_sentences([r for r in todo if r.id not in outcome.failed], deadline, trace)
        if outcome.unchanged and self.settings.ingest.sentence_vectors and self.settings.ingest.sentence_vectors_mode == "background":
            # A worker stopped before it was done (a gateway restart, a demo
            # that ended) left some unembedded: re-ingesting the unchanged
            # documents queues them again, and the expander's cache answers
            # those already embedded without running the model.
            self.backfill.add(dict.fromkeys(s for i, record in records.items() if i in outcome.unchanged
                                            for c in record.chunks for s in chunk_units(c.text, c.heading_path)))
        return outcome

    async def _unchanged(self, records: dict, deadline: Deadline) -> tuple[set[str], set[str]]:
        """(ids whose content hash every retriever already stores, ids some
        retriever stores in any version)."""
        request = retriever_pb2.GetDocumentHashesRequest(document_ids=list(records))
        stored = await asyncio.gather(*(r.get_document_hashes(request, deadline.left(30)) for r in self.retrievers))
        unchanged = {
            doc_id for doc_id, rec in records.items()
            if all(h.content_hashes.get(doc_id) == rec.content_hash for h in stored)
        }
        return unchanged, {doc_id for h in stored for doc_id in h.content_hashes}

    async def _embed(self, todo: list, deadline: Deadline) -> None:
        """Fills every chunk's embedding, ``embed_batch`` texts per call."""
        chunks = [c for rec in todo for c in rec.chunks]
        async for start, embedded in self._embed_passages([embedding_text(c) for c in chunks], deadline):
            for chunk, vector in zip(chunks[start:], embedded.vectors):
                chunk.embedding = list(vector.values)

    async def _embed_passages(self, texts: list[str], deadline: Deadline):
        """Yields (offset in ``texts``, EmbedResponse) per ``embed_batch``
        texts, passage side. Raises DownstreamError from the expander."""
        size = self.settings.ingest.embed_batch
        for start in range(0, len(texts), size):
            request = expander_pb2.EmbedRequest(texts=texts[start : start + size], kind=expander_pb2.EMBED_KIND_PASSAGE)
            yield start, await self.expander.embed(request, deadline.left(BULK_CALL_SECONDS))

    async def _embed_sentences(self, stored: list, deadline: Deadline, trace: Trace) -> None:
        """Embeds the ``sentence.maxsim`` units of ``stored``'s chunks
        passage-side and drops the vectors: the expander's embedding cache
        keeps them, so a question's MaxSim stage finds them there instead
        of embedding 50-60 sentences while the caller waits. In the
        background by default (``sentence_vectors_mode``: queued, stage
        detail "N sentences queued"); inline, the documents are already
        stored and searchable, so an expander failure here is the stage
        DEGRADED, not a failed ingest."""
        started = time.perf_counter()
        texts = list(dict.fromkeys(s for rec in stored for c in rec.chunks for s in chunk_units(c.text, c.heading_path)))
        if not texts:
            return
        if self.settings.ingest.sentence_vectors_mode == "background":
            queued = self.backfill.add(texts)
            trace.record(names.STAGE_SENTENCE_VECTORS, started,
                         detail=f"{queued} sentences queued for the background ({self.backfill.pending} waiting)")
            return
        cached = 0
        try:
            async for _, embedded in self._embed_passages(texts, deadline):
                cached += embedded.cache_hits
        except DownstreamError as err:
            trace.degrade("expander", names.STAGE_SENTENCE_VECTORS, started, f"sentences not embedded ahead: {err}")
            return
        trace.record(names.STAGE_SENTENCE_VECTORS, started, detail=f"{len(texts)} sentences, {cached} already cached")

    async def _store(self, todo: list, text_of: dict[str, str], deadline: Deadline, known: set[str]) -> dict[str, str]:
        """Stores ``todo`` in every retriever (``store_in_every_retriever``);
        {document id: reason} of the documents some retriever did not store."""
        batch = retriever_pb2.IngestDocumentsRequest(documents=[record_to_chunked_document(r, text_of[r.id]) for r in todo])
        return await store_in_every_retriever(self.retrievers, batch, deadline, known, self.settings.deadlines.default)
