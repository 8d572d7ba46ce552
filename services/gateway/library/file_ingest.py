"""Ingest of files (IngestRequest.files): each file is parsed by its
format's parser (``services.ingest.files``), chunked section by section
(``chunking.chunk_sections``) and stored as one document through
``DocumentIngest.store``. A file that cannot be parsed, or that a
retriever refuses, fails on its own with its reason (FileOutcome); the
others are stored. Parsing runs in a worker thread, one file at a time."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common.errors import DownstreamError
from services.common.filters import DEFAULT_COLLECTION, metadata_key_problem
from services.common.records import DocumentRecord, storable_text, text_digest, version_key
from services.ingest.chunking import ChunkingConfig, chunk_sections
from services.ingest.document_ids import MAX_HEADING_CHARS, MAX_ID_CHARS, path_id_problem
from services.gateway.library.document_ingest import DocumentIngest
from services.ingest.files import FileParseError, media_type_of, parse_file
from services.gateway.downstream.guard import Deadline, Trace
from services.gateway.search.collection_packs import PRIMARY

#: The most ids one ListDocuments call takes.
MAX_LISTED = 1000

@dataclass(slots=True)
class ParsedDocument:
    """One file ready to store: its record, full text and page count."""

    record: DocumentRecord
    text: str
    pages: int
    media_type: str


def document_from_file(file: gateway_pb2.IngestFile, collection: str, config: ChunkingConfig,
                       kept: dict[str, str] | None = None) -> ParsedDocument:
    """Parses and chunks one file into its document (id = ``document_id``
    or the file name; title from the file, its first MAX_HEADING_CHARS characters; heading path [title];
    metadata = ``kept`` (what the stored document had, for a file given none), overridden by what the
    file says, overridden by ``file.metadata``).

    Raises:
        FileParseError: bad id, unsupported or unparsable file, no text.
    """
    doc_id = (file.document_id or file.name).strip()
    if not doc_id or not storable_text(doc_id) or len(doc_id) > MAX_ID_CHARS:
        raise FileParseError(f"document id must be 1 to {MAX_ID_CHARS} characters without NUL (give name or document_id)")
    problem = path_id_problem(doc_id)
    if problem:
        raise FileParseError(f"document id {doc_id!r} {problem} (give another name or a document_id)")
    if any(not storable_text(k) or not storable_text(v) for k, v in file.metadata.items()):
        raise FileParseError("metadata must not contain NUL characters")
    unnamed = next((problem for k in file.metadata if (problem := metadata_key_problem(k))), None)
    if unnamed:  # stored, a filter could never name it
        raise FileParseError(f"metadata: {unnamed}")
    parsed = parse_file(file.name, file.media_type, file.content)
    # a title is what the file says (a heading, <title>, the PDF's metadata): cut to what every store indexes
    title = parsed.title[:MAX_HEADING_CHARS] or doc_id
    metadata = {**(kept or {}), **parsed.metadata, **dict(file.metadata)}
    record = chunk_sections(doc_id, title, [title], parsed.sections, metadata, config, collection=collection,
                            source=file.name)
    if not record.chunks:
        raise FileParseError("no text found in the file")
    return ParsedDocument(record, parsed.text(), parsed.pages, parsed.media_type)


class FileIngest:
    """Ingest of IngestRequest.files over ``documents``' store pipeline."""

    def __init__(self, documents: DocumentIngest, max_file_bytes: int = 10 * 1024 * 1024) -> None:
        self.documents = documents
        self.max_file_bytes = max_file_bytes

    async def ingest(self, files: Sequence[gateway_pb2.IngestFile], deadline: Deadline,
                     collection: str = DEFAULT_COLLECTION, domain_pack: str = "", first: int = 0,
                     seen: dict[str, int] | None = None) -> gateway_pb2.IngestResponse:
        """Parses, chunks and stores ``files`` in ``collection`` (domain
        pack ``domain_pack``, CollectionPacks.for_ingest); one FileOutcome
        per file, in order; ``failures`` names each failed file by its index.
        A batch of a larger call (ImportDocuments) gives the index of its
        first file, ``first``, and ``seen``: {document id: file index} of
        the earlier batches, updated here (a repeated id fails).

        Raises:
            InvalidArgument ("domain_pack"): see CollectionPacks.for_ingest.
            DownstreamError: hashes could not be read or the expander failed
                (nothing of this call is stored then).
        """
        pack = await self.documents.packs.for_ingest(collection, domain_pack, deadline)
        trace = Trace()
        files, held = await self._in_own_collection(files, collection, deadline)
        response = gateway_pb2.IngestResponse(received=len(files))
        outcomes = [gateway_pb2.FileOutcome(name=f.name, document_id=(f.document_id or f.name).strip(),
                                            media_type=media_type_of(f.name, f.media_type)) for f in files]
        started = time.perf_counter()
        parsed: dict[str, ParsedDocument] = {}
        index_of: dict[str, int] = {}
        seen = {} if seen is None else seen
        config = self.documents.chunking_for(pack)
        for i, file in enumerate(files):
            if len(file.content) > self.max_file_bytes:
                # Refused before parsing: its chunks and vectors would not fit
                # one store call, and parsing it would hold the expander for minutes.
                self._fail(response, outcomes[i], first + i, f"file is {len(file.content) / 1048576:.1f} MiB, over the "
                           f"{self.max_file_bytes / 1048576:g} MiB limit per file (GRAPHMESH_GATEWAY_INGEST__MAX_FILE_BYTES); split it")
                continue
            try:
                doc = await asyncio.to_thread(document_from_file, file, collection, config,
                                              None if file.metadata else held.get(outcomes[i].document_id))
            except FileParseError as err:
                self._fail(response, outcomes[i], first + i, str(err))
                continue
            if doc.record.id in index_of or doc.record.id in seen:
                earlier = seen.get(doc.record.id, first + index_of.get(doc.record.id, 0))
                self._fail(response, outcomes[i], first + i, f"document id {doc.record.id!r} repeats file {earlier} of this call")
                continue
            doc.record.domain_pack = pack
            parsed[doc.record.id], index_of[doc.record.id] = doc, i
            outcomes[i].pages, outcomes[i].media_type = doc.pages, doc.media_type
        trace.record(names.STAGE_PARSE, started)
        duplicates, same_titles = await self._look_alikes(parsed, index_of, collection, deadline) if parsed else ({}, {})
        if parsed:
            result = await self.documents.store({k: d.record for k, d in parsed.items()}, {k: d.text for k, d in parsed.items()},
                                                deadline, trace)
            for doc_id, i in index_of.items():
                seen[doc_id] = first + i
                if doc_id in result.failed:
                    self._fail(response, outcomes[i], first + i, result.failed[doc_id])
                elif doc_id in result.unchanged:
                    outcomes[i].status = gateway_pb2.FILE_STATUS_UNCHANGED
                else:
                    outcomes[i].status = gateway_pb2.FILE_STATUS_STORED
                    outcomes[i].replaced = doc_id in held
                    outcomes[i].chunks = len(parsed[doc_id].record.chunks)
                    outcomes[i].duplicate_of = duplicates.get(doc_id, "")
                    outcomes[i].same_title_as.extend(same_titles.get(doc_id, ()))
            response.stored, response.unchanged, response.chunks = len(result.stored), len(result.unchanged), result.chunks
        response.files.extend(outcomes)
        response.timings.extend(trace.timings)
        return response

    async def _in_own_collection(self, files: Sequence[gateway_pb2.IngestFile], collection: str,
                                 deadline: Deadline) -> tuple[list[gateway_pb2.IngestFile], dict[str, dict[str, str]]]:
        """(``files``, each whose document id another collection holds given the id "<collection>/<id>" (its
        FileOutcome.document_id says so); {id: stored metadata} of theirs ``collection`` already holds, whose stored
        version a changed file replaces (FileOutcome.replaced), and whose metadata a file given none keeps (two
        trials' folder re-syncs, without the --meta of the first ingest, emptied every year and team filter)). Ids are unique across collections, and a file's id comes
        from its name, so the same folder ingested into a second collection failed file by file (three trials:
        "document id 'docs/…' is stored in collection 'jiaowu'"). The same file ingested again into this
        collection gets the same id, so it is found unchanged. Best effort: a retriever that cannot be asked
        renames and keeps nothing (the store then refuses the file, naming the other collection)."""
        ids = sorted({(f.document_id or f.name).strip() for f in files} - {""})[:MAX_LISTED // 2]  # each asked twice
        if not ids or not self.documents.retrievers:
            return list(files), {}
        asked = [*ids, *(f"{collection}/{i}" for i in ids)]
        primary = next((r for r in self.documents.retrievers if r.name == PRIMARY), self.documents.retrievers[0])
        try:
            reply = await primary.list_documents(retriever_pb2.ListDocumentsRequest(ids=asked, page_size=len(asked)),
                                                 deadline.left(30))
        except DownstreamError:
            return list(files), {}
        elsewhere = {d.id for d in reply.documents if d.collection != collection}
        renamed = []
        for file in files:
            doc_id = (file.document_id or file.name).strip()
            if doc_id in elsewhere:
                file = gateway_pb2.IngestFile()
                file.CopyFrom(files[len(renamed)])
                file.document_id = f"{collection}/{doc_id}"
            renamed.append(file)
        return renamed, {d.id: dict(d.metadata) for d in reply.documents if d.collection == collection}

    async def _look_alikes(self, parsed: dict[str, ParsedDocument], index_of: dict[str, int], collection: str,
                           deadline: Deadline) -> tuple[dict[str, str], dict[str, list[str]]]:
        """({document id: id of another document of ``collection`` with the same text (``text_digest``)},
        {document id: ids of other documents of ``collection`` with the same title, but for a year, quarter, version or
        date (``records.version_key``), and other text}): documents
        stored before (asked of the retrievers), else earlier files of this call. A revised version saved as a new
        file keeps its title and answered beside the old one with other figures (three trials). Best effort: a
        retriever that cannot be asked gives no notice rather than failing the ingest."""
        digests = {doc_id: text_digest([c.text for c in sorted(doc.record.chunks, key=lambda c: c.ordinal)])
                   for doc_id, doc in parsed.items()}
        titles = {doc_id: doc.record.title for doc_id, doc in parsed.items() if doc.record.title}
        request = retriever_pb2.GetDocumentHashesRequest(text_digests=sorted(set(digests.values()) - {""}),
                                                         titles=sorted(set(titles.values())), collection=collection)
        replies = await asyncio.gather(*(r.get_document_hashes(request, deadline.left(30)) for r in self.documents.retrievers),
                                       return_exceptions=True)
        stored: dict[str, str] = {}
        titled: dict[str, list[str]] = {}
        for reply in replies:
            if isinstance(reply, DownstreamError):
                continue
            if isinstance(reply, BaseException):
                raise reply
            stored.update(reply.documents_by_text_digest)
            for found in reply.documents_by_title:  # stored titles match but for a year, quarter or version
                titled.setdefault(version_key(found.title), []).append(found.document_id)
        first_of: dict[str, str] = {}
        duplicates: dict[str, str] = {}
        for doc_id in sorted(index_of, key=index_of.get):
            digest = digests[doc_id]
            if not digest:
                continue
            other = stored.get(digest)
            if other is None or other == doc_id:
                other = first_of.get(digest)
            first_of.setdefault(digest, doc_id)
            if other and other != doc_id:
                duplicates[doc_id] = other
        same_titles: dict[str, list[str]] = {}
        earlier: dict[str, list[str]] = {}
        for doc_id in sorted(index_of, key=index_of.get):
            title = version_key(titles.get(doc_id, ""))
            if not title:
                continue
            others = [o for o in dict.fromkeys([*titled.get(title, ()), *earlier.get(title, ())])
                      if o not in (doc_id, duplicates.get(doc_id))]
            earlier.setdefault(title, []).append(doc_id)
            if others:
                same_titles[doc_id] = others
        return duplicates, same_titles

    @staticmethod
    def _fail(response: gateway_pb2.IngestResponse, outcome: gateway_pb2.FileOutcome, index: int, reason: str) -> None:
        outcome.status, outcome.reason = gateway_pb2.FILE_STATUS_FAILED, reason
        response.failures.append(types_pb2.IngestFailure(index=index, id=outcome.document_id, reason=f"{outcome.name or f'files[{index}] (no name)'}: {reason}"))
