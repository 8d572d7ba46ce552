"""Ingestion's reading side, free of gRPC and of any service: files and
JSONL records in, chunked documents out.

The public interface (what the gateway's library use cases, the cli and the
benches use):

- ``parse_file(name, media_type, data) -> ParsedFile`` and
  ``media_type_of(name, media_type)``: one parser per format (files/).
- ``parse_jsonl(payload) -> (documents, failures)``: document records, one
  JSON object a line; ``parse_entities`` / ``parse_triples`` for entity
  libraries and knowledge-graph triples.
- ``ChunkingConfig``, ``chunk_document``, ``chunk_sections``,
  ``embedding_text``: chunks cut at sentence ends under a token budget.

Errors: parsers raise ``FileParseError`` (a ValueError) for a file they
cannot read; JSONL readers return ``ParseFailure`` rows instead of raising.
"""
from services.ingest.chunking import ChunkingConfig, chunk_document, chunk_sections, embedding_text
from services.ingest.files import FileParseError, ParsedFile, media_type_of, parse_file
from services.ingest.jsonl_documents import ParsedDocument, ParseFailure, parse_jsonl
from services.ingest.jsonl_entities import parse_entities, parse_triples

__all__ = [
    "ChunkingConfig", "FileParseError", "ParseFailure", "ParsedDocument", "ParsedFile", "chunk_document",
    "chunk_sections", "embedding_text", "media_type_of", "parse_entities", "parse_file", "parse_jsonl",
    "parse_triples",
]
