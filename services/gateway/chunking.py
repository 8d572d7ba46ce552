"""Splits documents into chunks on sentence boundaries.

Chunk size and overlap are in characters (defaults 512/64, DESIGN.md). A
chunk never ends inside a sentence unless one sentence alone is longer than
the target size.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from graphmesh.common.v1 import types_pb2
from services.common.records import ChunkRecord, DocumentRecord
from services.common.text import document_terms, split_sentences, user_dictionary_digest


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    """Chunk sizes in characters."""

    target_chars: int = 512
    overlap_chars: int = 64

    def __post_init__(self) -> None:
        if self.target_chars <= 0:
            raise ValueError("target_chars must be positive")
        if not 0 <= self.overlap_chars < self.target_chars:
            raise ValueError("overlap_chars must be in [0, target_chars)")


def content_hash(title: str, heading_path: list[str], text: str, metadata: dict[str, str]) -> str:
    """SHA-256 hex of everything stored for a document, and of the user
    dictionary its terms were cut with; equal hashes mean the document is
    unchanged and ingestion can skip it."""
    fields: list = [title, heading_path, text, sorted(metadata.items())]
    if user_dictionary_digest():  # a new dictionary re-tokenises the document
        fields.append(user_dictionary_digest())
    payload = json.dumps(fields, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def split_text(text: str, config: ChunkingConfig) -> list[str]:
    """Splits ``text`` into pieces of about ``config.target_chars`` characters
    made of whole sentences; consecutive pieces share up to
    ``config.overlap_chars`` characters of whole trailing sentences. A sentence
    longer than the target is cut into target-sized slices."""
    sentences: list[str] = []
    for sentence in split_sentences(text):
        while len(sentence) > config.target_chars:
            sentences.append(sentence[: config.target_chars])
            sentence = sentence[config.target_chars :]
        if sentence:
            sentences.append(sentence)

    pieces: list[str] = []
    current: list[str] = []
    size = 0
    fresh = False  # whether ``current`` holds more than the carried-over overlap
    for sentence in sentences:
        if current and size + len(sentence) > config.target_chars:
            pieces.append("".join(current))
            overlap: list[str] = []
            overlap_size = 0
            for previous in reversed(current):
                if overlap_size + len(previous) > config.overlap_chars:
                    break
                overlap.insert(0, previous)
                overlap_size += len(previous)
            current, size = overlap, overlap_size
            fresh = False
        current.append(sentence)
        size += len(sentence)
        fresh = True
    if current and fresh:
        pieces.append("".join(current))
    return [p for p in pieces if p.strip()]


def chunk_document(
    doc_id: str,
    title: str,
    heading_path: list[str],
    text: str,
    metadata: dict[str, str],
    config: ChunkingConfig,
) -> DocumentRecord:
    """Builds the stored form of one document: its content hash and chunks.

    Each chunk's keyword terms cover the heading path and the chunk text, so a
    query naming a law or an article number matches it. Embeddings are left
    empty for the caller to fill.
    """
    heading_line = " ".join(heading_path)
    parent_context = heading_line
    chunks = []
    for ordinal, piece in enumerate(split_text(text, config)):
        chunks.append(
            ChunkRecord(
                id=f"{doc_id}#{ordinal}",
                document_id=doc_id,
                ordinal=ordinal,
                heading_path=list(heading_path),
                text=piece,
                parent_context=parent_context,
                terms=document_terms(f"{heading_line} {piece}"),
            )
        )
    return DocumentRecord(
        id=doc_id,
        title=title,
        heading_path=list(heading_path),
        metadata=dict(metadata),
        content_hash=content_hash(title, heading_path, text, metadata),
        chunks=chunks,
    )


def embedding_text(chunk: ChunkRecord) -> str:
    """The text embedded for a chunk: its headings, then its text."""
    return f"{' '.join(chunk.heading_path)}\n{chunk.text}"
def record_to_chunked_document(rec: DocumentRecord, text: str) -> types_pb2.ChunkedDocument:
    """Store record (with embeddings filled) -> protobuf chunked document."""
    return types_pb2.ChunkedDocument(
        document=types_pb2.Document(id=rec.id, title=rec.title, text=text, heading_path=rec.heading_path, metadata=rec.metadata),
        content_hash=rec.content_hash,
        chunks=[
            types_pb2.Chunk(
                id=c.id, document_id=c.document_id, ordinal=c.ordinal, heading_path=c.heading_path, text=c.text,
                parent_context=c.parent_context, embedding=c.embedding, keyword_tokens=c.terms,
            )
            for c in rec.chunks
        ],
    )


