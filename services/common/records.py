"""Plain records passed between the gRPC layer and the stores.

The stores (PostgreSQL, Neo4j) take and return these dataclasses, never
protobuf messages, so they can be tested without gRPC.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: What joins a document's chunk texts before ``text_digest`` hashes them (ASCII record separator, which
#: chunk text does not hold). retriever_pg's schema migration 8 computes the same digest in SQL.
DIGEST_SEPARATOR = "\x1e"


def storable_text(value: Any) -> bool:
    """True for a str every store can hold: no NUL character, and valid
    UTF-8 (no lone surrogate such as \\ud800)."""
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_digest(chunk_texts: Sequence[str]) -> str:
    """SHA-256 hex of a document's chunk texts in reading order, joined by
    DIGEST_SEPARATOR: equal for two files whose text was cut the same way,
    whatever their names, titles or metadata (a file stored twice under two
    names); "" for a document without chunks."""
    if not chunk_texts:
        return ""
    return hashlib.sha256(DIGEST_SEPARATOR.join(chunk_texts).encode("utf-8")).hexdigest()


#: What a revised version's title adds to the old one's, and nothing else: a year, a quarter, a version number, a
#: date, a 版 mark, and the separators around them. Two trials' revisions saved under new file names
#: (carrier_rates_2026Q4.csv and carrier_rates_2027Q1.csv, 维修配件价格表.csv and 维修配件价格表2027.csv) got
#: no notice, since a CSV's title is its file name. One pattern for Python's re and PostgreSQL's
#: regexp_replace (the store compares stored titles by it in SQL).
VERSION_MARKS = (r"(19|20)[0-9]{2}([-./年][0-9]{1,2}([-./月][0-9]{1,2}日?)?月?)?|[qQ][1-4]|[vV][0-9]+([.][0-9]+)*"
                 r"|最新版|修订版|新版|旧版|版本|版|[春夏秋冬]季|[上下]学期|第[一二三四]学期|[上下]半年"
                 r"|[-_ .()（）【】]+")


def version_key(title: str) -> str:
    """``title`` lower-cased without ``VERSION_MARKS``: equal for the versions of one document saved under
    names that differ by a year, quarter, season, term, version or date ("" when nothing else is left): a trial's
    kindergarten's 2026年秋季学期 and 2027年春季学期 fee sheets answered side by side with no notice."""
    return re.sub(VERSION_MARKS, "", title.lower())


@dataclass(slots=True)
class ChunkRecord:
    """One chunk of a document, ready to store.

    Attributes:
        id: "<document id>#<ordinal>".
        document_id: id of the owning document.
        ordinal: 0-based position inside the document.
        heading_path: headings from the document root down, outermost first.
        text: chunk text (characters).
        parent_context: headings and document opening, for the LLM.
        embedding: passage-side embedding (unit norm), may be empty.
        terms: keyword terms of heading path + text (see ``text.document_terms``).
        metadata: chunk metadata, e.g. {"page": "3-4"} (PDF pages it spans).
    """

    id: str
    document_id: str
    ordinal: int
    heading_path: list[str]
    text: str
    parent_context: str = ""
    embedding: list[float] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class DocumentRecord:
    """A document with its chunks.

    Attributes:
        id: caller's stable id (gold labels refer to it).
        title: document title (a law's name for law articles).
        heading_path: headings above the text, outermost first.
        metadata: free-form string metadata.
        content_hash: SHA-256 hex of title, headings and text.
        chunks: chunks in order.
        collection: the collection it belongs to.
        source: where it came from (file name), "" for JSONL records.
        domain_pack: its collection's domain pack (domains/), "" = the
            collection's recorded pack, else "generic".
    """

    id: str
    title: str
    heading_path: list[str]
    metadata: dict[str, str]
    content_hash: str
    chunks: list[ChunkRecord] = field(default_factory=list)
    collection: str = "default"
    source: str = ""
    domain_pack: str = ""


@dataclass(slots=True)
class Hit:
    """A chunk found by one retrieval channel.

    Attributes:
        chunk_id / document_id / title / heading_path / text / ordinal: as stored.
        channel: "<store>.<method>", e.g. "pg.vector", "pg.keyword", "graph.heading".
        score: the channel's raw score (cosine similarity, BM25, fulltext score).
        evidence: what matched (keywords, heading, edge), for the caller.
        embedding: stored embedding when the channel returns it, else empty.
        collection: collection of the chunk's document ("" when unknown).
        metadata: document metadata with the chunk's own (e.g. "page") over it, when the store returns it.
        context_text: the chunk's parent context (its section around it,
            Candidate.context_text) when asked for; "" otherwise.
        script: writing system of the chunk's document (Candidate.script:
            "latin", "cjk", or "" when not known).
    """

    chunk_id: str
    document_id: str
    title: str
    heading_path: list[str]
    text: str
    ordinal: int
    channel: str
    score: float
    evidence: str = ""
    embedding: list[float] = field(default_factory=list)
    collection: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    context_text: str = ""
    script: str = ""


@dataclass(slots=True)
class StoredDocumentInfo:
    """A stored document as listed (graphmesh.common.v1.StoredDocument).

    Attributes:
        id, collection, title, source, heading_path, metadata, content_hash: as stored.
        chunk_count: chunks stored for it.
        update_time_ms: when it was last written (ms since the Unix epoch), 0 when unknown.
        chunks: its chunks in reading order (id, ordinal, heading_path,
            text, metadata), only when listed ``with_chunks``.
    """

    id: str
    collection: str
    title: str
    source: str
    heading_path: list[str]
    metadata: dict[str, str]
    content_hash: str
    chunk_count: int
    update_time_ms: int = 0
    chunks: list[ChunkRecord] = field(default_factory=list)


@dataclass(slots=True)
class Deletion:
    """What one store removed (graphmesh.common.v1.DeletionCounts), and
    the ids of the documents removed."""

    documents: int = 0
    chunks: int = 0
    vectors: int = 0
    postings: int = 0
    graph_nodes: int = 0
    graph_edges: int = 0
    entities: int = 0
    document_ids: list[str] = field(default_factory=list)

    def add(self, other: "Deletion") -> "Deletion":
        """Adds ``other``'s counts and ids to this one; returns self."""
        for name in ("documents", "chunks", "vectors", "postings", "graph_nodes", "graph_edges", "entities"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.document_ids = sorted(set(self.document_ids) | set(other.document_ids))
        return self


@dataclass(slots=True)
class EntityExport:
    """Library entities with their facts, as a store exports them
    (graphmesh.retriever.v1.ExportEntitiesResponse): entities and
    children by name; triples (subject, predicate, object) sorted."""

    entities: list["EntityRecord"] = field(default_factory=list)
    triples: list[tuple[str, str, str]] = field(default_factory=list)
    children: list["EntityRecord"] = field(default_factory=list)


@dataclass(slots=True)
class IngestFailureRecord:
    """A document that could not be stored; the others were."""

    index: int
    id: str
    reason: str


@dataclass(slots=True)
class IngestResult:
    """Outcome of storing a batch of documents."""

    stored: int = 0
    unchanged: int = 0
    failures: list[IngestFailureRecord] = field(default_factory=list)


@dataclass(slots=True)
class EntityHit:
    """An entity found by one channel.

    Attributes:
        name, category, definition, aliases, degree: the stored entity.
        channel: "graph.exact", "graph.alias", "graph.fulltext",
            "graph.attribute", "graph.expand", "graph.category",
            "pg.entity_keyword", "pg.entity_vector".
        score: raw channel score (1.0 exact; coverage in [0, 1]; Lucene score;
            seed score x edge weight; BM25; cosine).
        matched: what matched (alias, values, "PARENT_OF<-X").
        relation: "direct", "parent", "same_object", "same_property",
            "same_category", "attribute", "category_member".
    """

    name: str
    category: str
    definition: str
    aliases: list[str]
    degree: int
    channel: str
    score: float
    matched: str
    relation: str


@dataclass(slots=True)
class EntityRecord:
    """A library entity as ingested (graphmesh.common.v1.Entity), with the
    embedding of each of its surfaces when the gateway sent them.

    Attributes:
        name: canonical name (the entity's id), stripped.
        category, definition, aliases, parents, attributes: as ingested.
        surface_embeddings: one vector per surface (name, then distinct
            aliases in order); empty when none were sent.
    """

    name: str
    category: str = ""
    definition: str = ""
    aliases: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)
    surface_embeddings: list[list[float]] = field(default_factory=list)


@dataclass(slots=True)
class ExpansionTerm:
    """One query-expansion term and where it came from (MarxSphere
    expandQuery L1/L2/L3).

    Attributes:
        text: the term (an entity name or a heading).
        origin: "entity_name", "entity_description" or "heading".
        matched: the keyword(s) that found it ("kw1+kw2" for headings).
    """

    text: str
    origin: str
    matched: str
