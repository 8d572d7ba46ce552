"""Document ingestion through the gateway: parse JSONL, skip documents whose
content hash every retriever already holds, chunk, embed (expander), and
store in every retriever. A record that cannot be read, or that a retriever
refuses, is reported in ``failures``; the others are stored."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from prometheus_client import Counter

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common.errors import DownstreamError
from services.gateway.chunking import ChunkingConfig, chunk_document, embedding_text, record_to_chunked_document
from services.gateway.clients import Expander, Retriever
from services.gateway.config import GatewaySettings
from services.gateway.guard import Deadline, Trace
from services.gateway.jsonl_documents import ParseFailure, parse_jsonl

#: Seconds one bulk call (embed a batch, store a batch) may take at most.
BULK_CALL_SECONDS = 600.0

INGEST_RECORDS = Counter(
    "graphmesh_ingest_records_total", "Records ingested through the gateway, by kind and outcome (stored, unchanged, failed).",
    ("kind", "outcome"))


def count_ingest(kind: str, response: gateway_pb2.IngestResponse) -> None:
    """Adds one Ingest call's outcome to graphmesh_ingest_records_total."""
    INGEST_RECORDS.labels(kind, "stored").inc(response.stored)
    INGEST_RECORDS.labels(kind, "unchanged").inc(response.unchanged)
    INGEST_RECORDS.labels(kind, "failed").inc(len(response.failures))


def failure_proto(f: ParseFailure) -> types_pb2.IngestFailure:
    """The IngestFailure of a record that could not be read."""
    return types_pb2.IngestFailure(index=f.index, id=f.id, reason=f"{f.field + ': ' if f.field else ''}{f.reason}")


class DocumentIngest:
    """Ingest of INGEST_KIND_DOCUMENTS.

    Args:
        settings: chunk sizes and the embedding batch size.
        expander: embeds the chunks (passage side).
        retrievers: every retriever; each stores every document.
    """

    def __init__(self, settings: GatewaySettings, expander: Expander, retrievers: Sequence[Retriever]) -> None:
        self.settings = settings
        self.expander = expander
        self.retrievers = list(retrievers)

    async def ingest(self, payload: bytes, deadline: Deadline) -> tuple[gateway_pb2.IngestResponse, list[ParseFailure]]:
        """Parses and stores ``payload`` (JSONL documents).

        Returns:
            the response and the records that could not be read (so the
            servicer can reject a payload with no readable record).
        Raises:
            DownstreamError: a retriever could not be asked for its hashes,
                or the expander could not embed.
        """
        s = self.settings
        trace = Trace()
        started = time.perf_counter()
        docs, parse_failures = parse_jsonl(payload)
        response = gateway_pb2.IngestResponse(received=len(docs) + len(parse_failures))
        response.failures.extend(failure_proto(f) for f in parse_failures)
        trace.record(names.STAGE_PARSE, started)
        if not docs:
            return response, parse_failures

        latest = {d.id: d for d in docs}  # the last record of each id wins
        config = ChunkingConfig(s.chunk_chars, s.chunk_overlap)
        records = {d.id: chunk_document(d.id, d.title, d.heading_path, d.text, d.metadata, config) for d in latest.values()}
        started = time.perf_counter()
        unchanged = await self._unchanged(records, deadline)
        response.unchanged = len(unchanged)
        todo = [records[i] for i in records if i not in unchanged]
        trace.record(names.STAGE_HASH_CHECK, started)
        if todo:
            started = time.perf_counter()
            await self._embed(todo, deadline)
            trace.record(names.STAGE_EMBED, started)
            started = time.perf_counter()
            failed = await self._store(todo, {d.id: d.text for d in latest.values()}, deadline)
            trace.record(names.STAGE_STORE, started)
            index_of = {d.id: d.index for d in latest.values()}
            response.stored = len(todo) - len(failed)
            response.chunks = sum(len(r.chunks) for r in todo if r.id not in failed)
            response.failures.extend(types_pb2.IngestFailure(index=index_of[i], id=i, reason=r) for i, r in failed.items())
        response.timings.extend(trace.timings)
        return response, parse_failures

    async def _unchanged(self, records: dict, deadline: Deadline) -> set[str]:
        """Ids whose content hash every retriever already stores."""
        request = retriever_pb2.GetDocumentHashesRequest(document_ids=list(records))
        stored = await asyncio.gather(*(r.get_document_hashes(request, deadline.left(30)) for r in self.retrievers))
        return {
            doc_id for doc_id, rec in records.items()
            if all(h.content_hashes.get(doc_id) == rec.content_hash for h in stored)
        }

    async def _embed(self, todo: list, deadline: Deadline) -> None:
        """Fills every chunk's embedding, ``embed_batch`` texts per call."""
        size = self.settings.embed_batch
        chunks = [c for rec in todo for c in rec.chunks]
        texts = [embedding_text(c) for c in chunks]
        for start in range(0, len(texts), size):
            request = expander_pb2.EmbedRequest(texts=texts[start : start + size], kind=expander_pb2.EMBED_KIND_PASSAGE)
            embedded = await self.expander.embed(request, deadline.left(BULK_CALL_SECONDS))
            for chunk, vector in zip(chunks[start : start + size], embedded.vectors):
                chunk.embedding = list(vector.values)

    async def _store(self, todo: list, text_of: dict[str, str], deadline: Deadline) -> dict[str, str]:
        """Stores ``todo`` in every retriever; {document id: reason} of the
        documents some retriever did not store (the first reason wins)."""
        batch = retriever_pb2.IngestDocumentsRequest(documents=[record_to_chunked_document(r, text_of[r.id]) for r in todo])
        results = await asyncio.gather(
            *(r.ingest_documents(batch, deadline.left(BULK_CALL_SECONDS)) for r in self.retrievers), return_exceptions=True)
        failed: dict[str, str] = {}
        for retriever, result in zip(self.retrievers, results):
            if isinstance(result, DownstreamError):
                for rec in todo:
                    failed.setdefault(rec.id, str(result))
            elif isinstance(result, BaseException):
                raise result
            else:
                for f in result.failures:
                    failed.setdefault(f.id or todo[f.index].id, f"{retriever.name}: {f.reason}")
        return failed
