"""Conversions between the retrievers' store records and protobuf messages."""
from __future__ import annotations

from graphmesh.common.v1 import types_pb2
from services.common.records import ChunkRecord, Deletion, DocumentRecord, Hit, IngestFailureRecord, StoredDocumentInfo


def hits_to_candidates(hits: list[Hit], source_by_channel: dict[str, int],
                       with_embeddings: bool = True) -> list[types_pb2.Candidate]:
    """Groups hits by chunk id into candidates; each channel's rank is the
    hit's 1-based position among that channel's hits. The candidate's source
    is that of its first channel listed in ``source_by_channel`` order; its
    embedding is the hits' stored one only ``with_embeddings``."""
    ranks: dict[str, int] = {}
    order: list[str] = []
    by_id: dict[str, types_pb2.Candidate] = {}
    channels_of: dict[str, list[str]] = {}
    for hit in hits:
        ranks[hit.channel] = ranks.get(hit.channel, 0) + 1
        cand = by_id.get(hit.chunk_id)
        if cand is None:
            cand = types_pb2.Candidate(
                id=hit.chunk_id, document_id=hit.document_id, title=hit.title,
                heading_path=hit.heading_path, text=hit.text, ordinal=hit.ordinal,
                collection=hit.collection, metadata=hit.metadata, context_text=hit.context_text, script=hit.script,
            )
            by_id[hit.chunk_id] = cand
            order.append(hit.chunk_id)
            channels_of[hit.chunk_id] = []
        if hit.context_text and not cand.context_text:
            cand.context_text = hit.context_text
        if with_embeddings and hit.embedding and not cand.embedding:
            cand.embedding.extend(hit.embedding)
        cand.channel_scores.append(
            types_pb2.ChannelScore(channel=hit.channel, score=hit.score, rank=ranks[hit.channel], evidence=hit.evidence)
        )
        channels_of[hit.chunk_id].append(hit.channel)
    priority = list(source_by_channel)
    for cid, cand in by_id.items():
        chans = sorted(channels_of[cid], key=lambda c: priority.index(c) if c in priority else len(priority))
        cand.source = source_by_channel.get(chans[0], types_pb2.SOURCE_DOCUMENT_CHUNK)
    return [by_id[cid] for cid in order]


def chunked_document_to_record(doc: types_pb2.ChunkedDocument) -> DocumentRecord:
    """Protobuf chunked document -> store record."""
    d = doc.document
    return DocumentRecord(
        id=d.id, title=d.title, heading_path=list(d.heading_path), metadata=dict(d.metadata),
        content_hash=doc.content_hash, collection=d.collection or "default", source=d.source, domain_pack=d.domain_pack,
        chunks=[
            ChunkRecord(
                id=c.id, document_id=c.document_id or d.id, ordinal=c.ordinal, heading_path=list(c.heading_path),
                text=c.text, parent_context=c.parent_context, embedding=list(c.embedding), terms=list(c.keyword_tokens),
                metadata=dict(c.metadata),
            )
            for c in doc.chunks
        ],
    )


def failures_to_proto(failures: list[IngestFailureRecord]) -> list[types_pb2.IngestFailure]:
    """Store failures -> protobuf failures."""
    return [types_pb2.IngestFailure(index=f.index, id=f.id, reason=f.reason) for f in failures]


def stored_document_to_proto(info: StoredDocumentInfo) -> types_pb2.StoredDocument:
    """Store listing record -> protobuf StoredDocument (no name: the gateway sets it)."""
    return types_pb2.StoredDocument(
        id=info.id, collection=info.collection, title=info.title, source=info.source, heading_path=info.heading_path,
        metadata=info.metadata, content_hash=info.content_hash, chunk_count=info.chunk_count,
        update_time_ms=info.update_time_ms,
        chunks=[types_pb2.StoredChunk(id=c.id, ordinal=c.ordinal, heading_path=c.heading_path, text=c.text,
                                      metadata=c.metadata) for c in info.chunks],
    )


def deletion_to_proto(d: Deletion) -> types_pb2.DeletionCounts:
    """Store deletion record -> protobuf DeletionCounts."""
    return types_pb2.DeletionCounts(
        documents=d.documents, chunks=d.chunks, vectors=d.vectors, postings=d.postings,
        graph_nodes=d.graph_nodes, graph_edges=d.graph_edges, entities=d.entities,
    )
