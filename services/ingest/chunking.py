"""Splits documents into chunks on sentence boundaries.

Sizes are in tokens as ``sentences.count_tokens`` counts them (a CJK
character is one token, a Latin word or number is one, a symbol is one): 512 with 64 of
overlap by default, the MetaSearch chunking
(the MetaSearch design (docs/references.md)), configurable with
GRAPHMESH_GATEWAY_INGEST__CHUNK_TOKENS / ..._CHUNK_OVERLAP. A chunk ends at a
sentence end (Chinese punctuation and closing quotes understood) unless one
sentence alone is longer than the target; a record of at most the target
(a law article) stays one chunk. A file's sections are chunked one by one,
so no chunk spans two headings, and each chunk records the pages it spans.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from graphmesh.common.v1 import types_pb2
from services.common.filters import DEFAULT_COLLECTION
from services.common.records import ChunkRecord, DocumentRecord
from services.common.text import (NUMBER_TERMS_VERSION, document_terms, number_terms, same_title, table_headers, title_words,
                                  user_dictionary_digest)
from services.ingest.files.model import Block, Section
from services.ingest.sentences import count_tokens, cut_tokens, pack, split_sentences


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    """Chunk sizes in tokens (``sentences.count_tokens``)."""

    target_tokens: int = 512
    overlap_tokens: int = 64

    def __post_init__(self) -> None:
        if self.target_tokens <= 0:
            raise ValueError("target_tokens must be positive")
        if not 0 <= self.overlap_tokens < self.target_tokens:
            raise ValueError("overlap_tokens must be in [0, target_tokens)")


def content_hash(title: str, heading_path: list[str], text: str, metadata: dict[str, str],
                 collection: str = DEFAULT_COLLECTION, source: str = "") -> str:
    """SHA-256 hex of everything stored for a document, and of the user
    dictionary its terms were cut with (and of the number terms' version,
    for a document that has number terms: text.number_terms); equal hashes mean the document is
    unchanged and ingestion can skip it. The collection and source count
    only when set, so documents stored before collections keep their hash."""
    fields: list = [title, heading_path, text, sorted(metadata.items())]
    if user_dictionary_digest():  # a new dictionary re-tokenises the document
        fields.append(user_dictionary_digest())
    if number_terms(" ".join([title, *heading_path, text])):
        # stored before number terms existed, such a document is re-tokenised once; one without keeps its hash
        fields.append(NUMBER_TERMS_VERSION)
    if collection != DEFAULT_COLLECTION or source:
        fields.append([collection, source])
    payload = json.dumps(fields, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _sentences(blocks: Sequence[Block], target: int) -> list[tuple[str, int | None]]:
    """(sentence, page) of ``blocks`` in order, sentences over ``target``
    tokens cut into target-sized pieces."""
    out: list[tuple[str, int | None]] = []
    for block in blocks:
        for sentence in split_sentences(block.text.strip() + "\n"):
            pieces = cut_tokens(sentence, target) if count_tokens(sentence) > target else [sentence]
            out.extend((p, block.page) for p in pieces)
    return out


def split_text(text: str, config: ChunkingConfig) -> list[str]:
    """``text`` as chunk texts of whole sentences, at most
    ``config.target_tokens`` tokens each (a longer sentence is cut at token
    boundaries); consecutive chunks share up to ``config.overlap_tokens``
    tokens of whole trailing sentences."""
    sentences = [s for s, _ in _sentences([Block(text)], config.target_tokens)]
    pieces = ("".join(sentences[a:b]).strip() for a, b in pack(sentences, config.target_tokens, config.overlap_tokens))
    return [p for p in pieces if p]


def _page_label(pages: set[int]) -> dict[str, str]:
    if not pages:
        return {}
    low, high = min(pages), max(pages)
    return {"page": str(low) if low == high else f"{low}-{high}"}


def chunk_sections(doc_id: str, title: str, heading_path: list[str], sections: Sequence[Section],
                   metadata: dict[str, str], config: ChunkingConfig, *, collection: str = DEFAULT_COLLECTION,
                   source: str = "", hash_text: str | None = None) -> DocumentRecord:
    """The stored form of a document made of sections: each section is
    chunked on its own under ``heading_path`` + its headings; a chunk's
    metadata says the pages it spans ("3" or "3-4") when its blocks have
    pages. A section that only repeats the document's title (a title set
    as a heading with the body's headings as its siblings) is not a chunk
    of its own when another section holds text: every chunk carries the
    title in its heading path, and a chunk of the title alone would rank
    first for any question that names the document. A chunk that starts
    inside a table (a long table cut across chunks) starts with the table's
    header row, so that its rows keep their column names. ``hash_text``
    (default: every section's headings and text) goes into the content
    hash. Embeddings are left empty for the caller."""
    chunks: list[ChunkRecord] = []
    for section in [s for s in sections if not _title_only(s, heading_path)] or sections:
        own, path = section.heading_path, list(heading_path)
        if own and path and same_title(own[0], path[-1]):  # the file's title is its first heading too
            # keep the longer wording once ("手册" and "手册（2025 版）")
            own, path = (own[1:], path) if title_words(own[0]) <= title_words(path[-1]) else (own, path[:-1])
        path = [*path, *own]
        heading_line = " ".join(path)
        sentences = _sentences(section.blocks, config.target_tokens)
        # a row is a whole line: a sentence that ends one
        headers = table_headers([s if s.endswith("\n") else "" for s, _ in sentences])
        for a, b in pack([s for s, _ in sentences], config.target_tokens, config.overlap_tokens):
            # a chunk that starts inside a table starts with the table's header row
            header = sentences[headers[a]][0] if headers.get(a, a) < a else ""
            text = (header + "".join(s for s, _ in sentences[a:b])).strip()
            if not text:
                continue
            chunks.append(ChunkRecord(
                id=f"{doc_id}#{len(chunks)}", document_id=doc_id, ordinal=len(chunks), heading_path=path, text=text,
                parent_context=heading_line, terms=document_terms(f"{heading_line} {text}"),
                metadata=_page_label({p for _, p in sentences[a:b] if p}),
            ))
    if hash_text is None:
        hash_text = "\n".join(" / ".join(s.heading_path) + "\n" + "\n".join(b.text for b in s.blocks) for s in sections)
    return DocumentRecord(
        id=doc_id, title=title, heading_path=list(heading_path), metadata=dict(metadata),
        content_hash=content_hash(title, heading_path, hash_text, metadata, collection, source),
        chunks=chunks, collection=collection, source=source,
    )


def _title_only(section: Section, heading_path: list[str]) -> bool:
    """Whether ``section`` is the document's title heading with nothing under it but the title itself."""
    title = heading_path[-1:] if heading_path else []
    return bool(title) and section.heading_path == title and [b.text.strip() for b in section.blocks] == title


def chunk_document(doc_id: str, title: str, heading_path: list[str], text: str, metadata: dict[str, str],
                   config: ChunkingConfig, collection: str = DEFAULT_COLLECTION) -> DocumentRecord:
    """The stored form of a one-section document (a JSONL record): its
    content hash and chunks, every chunk under ``heading_path``.

    Each chunk's keyword terms cover the heading path and the chunk text, so a
    query naming a law or an article number matches it.
    """
    return chunk_sections(doc_id, title, heading_path, [Section([], [Block(text)])], metadata, config,
                          collection=collection, hash_text=text)


def embedding_text(chunk: ChunkRecord) -> str:
    """The text embedded for a chunk: its headings, then its text."""
    return f"{' '.join(chunk.heading_path)}\n{chunk.text}"


def record_to_chunked_document(rec: DocumentRecord, text: str) -> types_pb2.ChunkedDocument:
    """Store record (with embeddings filled) -> protobuf chunked document."""
    return types_pb2.ChunkedDocument(
        document=types_pb2.Document(id=rec.id, title=rec.title, text=text, heading_path=rec.heading_path,
                                    metadata=rec.metadata, collection=rec.collection, source=rec.source,
                                    domain_pack=rec.domain_pack),
        content_hash=rec.content_hash,
        chunks=[
            types_pb2.Chunk(
                id=c.id, document_id=c.document_id, ordinal=c.ordinal, heading_path=c.heading_path, text=c.text,
                parent_context=c.parent_context, embedding=c.embedding, keyword_tokens=c.terms, metadata=c.metadata,
            )
            for c in rec.chunks
        ],
    )
