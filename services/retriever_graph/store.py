"""Neo4j storage for the graph retriever: schema, ingestion and retrieval.

Graph model::

    (:Heading {id, name, level, keys, next_position})
        -[:PARENT_OF]->(:Heading)             nested headings (law > chapter > section)
        -[:PARENT_OF]->(:Document {id, title, content_hash, heading_path, metadata, position})
    (:Document)-[:HAS_CHUNK]->(:Chunk {id, document_id, ordinal, text, heading_path,
                                        parent_context, search_text})
    (:Chunk)-[:NEXT]->(:Chunk)                consecutive chunks of one document

A document's heading path is ``[law, chapter, section, article]`` (empty parts
omitted). Every element but the last becomes a Heading whose id is the path
prefix joined with ``/`` (``"劳动法/第一章 总则"``); the last element (the
article, ``"第十条"``) belongs to the Document. A document whose path has no
element above the last hangs under a Heading named after its title, when it
has one. ``Document.position`` is the order in which documents were first
stored under their parent heading, so the previous and next articles of a
document are its siblings at ``position - 1`` and ``position + 1``.

Full-text indexes use Neo4j's ``cjk`` analyzer (Lucene CJKAnalyzer): Chinese
text is indexed as overlapping character bigrams, so a word inside a sentence
matches without any word segmentation at index time. Each keyword is searched
as a quoted phrase (its bigrams adjacent and in order), so ``劳动者`` does not
match a text that only contains ``劳动``. A single Chinese character never
matches (the index holds no unigrams for runs of Chinese text). The chunks'
index serves only graph.heading, graph.fulltext and graph.neighbour (off by
default), so it is built on their first search, not at ``migrate``: kept up
to date through a corpus load it cost Neo4j about a sixth of its CPU
(docs/benchmarks.md, "The chunks' full-text index on first use").

Collections: every Document and Heading carries ``collection``; a
Heading's id is prefixed with its collection and "\x1f" unless the
collection is "default" (so a store built before collections keeps its
ids). Document metadata is also stored as ``meta.<key>`` properties for
filtering (``filter_cypher``). Search channels apply the request's scope
(collections, metadata conditions) right after the full-text index yields,
before their limits, so a filtered search still fills its top_k.
``migrate`` upgrades a store ingested before collections: every Document
and Heading gets collection "default" and the documents their
``meta.<key>`` properties.

All Cypher takes user data as parameters; query strings are constants
(the scope expressions of ``filter_cypher`` are built from constants too).
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import dataclass
from collections.abc import Callable, Collection
from typing import Any, Iterable

from neo4j import (
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    NotificationDisabledClassification,
    RoutingControl,
)
from neo4j.exceptions import ClientError, DriverError

from services.common import names
from services.common.store_deadline import QueryBudget, StoreTimeout
from services.retriever_graph.timeouts import bound, timed, timed_work, translate_timeouts
from services.common.entity_skeleton import name_key
from services.common.filters import DEFAULT_COLLECTION, Condition
from services.common.records import Deletion, DocumentRecord, Hit, IngestFailureRecord, IngestResult, StoredDocumentInfo
import domains
from services.retriever_graph import doc_graph
from services.retriever_graph.doc_graph import DOCGRAPH_VERSION, link_documents
from services.retriever_graph.filter_cypher import meta_properties, scope_cypher
from services.retriever_graph.lifecycle import collection_counts, delete_documents, list_documents, prune_headings

log = logging.getLogger(__name__)

CHUNK_INDEX = "graph_chunk_search"
HEADING_INDEX = "graph_heading_name"
FULLTEXT_ANALYZER = "cjk"
HEADING_SEPARATOR = "/"
DEFAULT_BATCH_SIZE = 500

CHANNEL_HEADING = names.GRAPH_HEADING
CHANNEL_FULLTEXT = names.GRAPH_FULLTEXT
CHANNEL_NEIGHBOUR = names.GRAPH_NEIGHBOUR
ALL_CHANNELS = names.GRAPH_CHANNELS
# Tie-break when two channels give a chunk the same score.
_CHANNEL_RANK = {CHANNEL_HEADING: 0, CHANNEL_FULLTEXT: 1, CHANNEL_NEIGHBOUR: 2}

_CONSTRAINTS = (
    "CREATE CONSTRAINT graph_document_id IF NOT EXISTS FOR (d:Document) REQUIRE d.id IS UNIQUE",
    "CREATE CONSTRAINT graph_chunk_id IF NOT EXISTS FOR (c:Chunk) REQUIRE c.id IS UNIQUE",
    "CREATE CONSTRAINT graph_heading_id IF NOT EXISTS FOR (h:Heading) REQUIRE h.id IS UNIQUE",
    "CREATE INDEX graph_document_collection IF NOT EXISTS FOR (d:Document) ON (d.collection)",
    "CREATE INDEX graph_heading_collection IF NOT EXISTS FOR (h:Heading) ON (h.collection)",
    "CREATE CONSTRAINT graph_collection_name IF NOT EXISTS FOR (k:Collection) REQUIRE k.name IS UNIQUE",
)
#: Collections stored before domain packs existed were read as Chinese
#: statutes; they keep that pack (a documented version step).
_LEGACY_COLLECTION_PACK = "law_zh"
_RECORD_LEGACY_COLLECTIONS = """
MATCH (d:Document) WITH DISTINCT coalesce(d.collection, 'default') AS name
MERGE (k:Collection {name: name}) ON CREATE SET k.domain_pack = $pack, k.legacy = true
"""
_DROP_EMPTY_COLLECTIONS = """
UNWIND $names AS name
MATCH (k:Collection {name: name})
WHERE NOT EXISTS { MATCH (d:Document) WHERE coalesce(d.collection, 'default') = name }
DELETE k
"""
#: Separates a non-default collection from the heading path in Heading ids.
COLLECTION_SEPARATOR = "\x1f"
#: Documents upgraded per transaction by ``migrate``.
_MIGRATE_BATCH = 5000
# Index names cannot be parameters; these are constants, not user data.
_FULLTEXT_INDEXES = {
    CHUNK_INDEX: (
        f"CREATE FULLTEXT INDEX {CHUNK_INDEX} IF NOT EXISTS FOR (c:Chunk) ON EACH [c.search_text] "
        f"OPTIONS {{indexConfig: {{`fulltext.analyzer`: '{FULLTEXT_ANALYZER}'}}}}"
    ),
    HEADING_INDEX: (
        f"CREATE FULLTEXT INDEX {HEADING_INDEX} IF NOT EXISTS FOR (h:Heading) ON EACH [h.name] "
        f"OPTIONS {{indexConfig: {{`fulltext.analyzer`: '{FULLTEXT_ANALYZER}'}}}}"
    ),
}

#: Seconds a search waits for the chunk index it has just asked for before it
#: answers without the index's channels (``ChunkIndexBuilding``); a small
#: store's index is online well within it.
CHUNK_INDEX_WAIT_S = 2.0
_INDEX_STATE = "SHOW INDEXES YIELD name, state, populationPercent WHERE name = $name RETURN state, populationPercent"


class ChunkIndexBuilding(Exception):
    """The chunk full-text index, asked for by this store's first search
    that needs it, is still being populated; the message says how far."""


# Characters with a meaning in Lucene's classic query syntax.
LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')


def escape_lucene(term: str) -> str:
    """Backslash-escapes Lucene query syntax characters
    (``+ - && || ! ( ) { } [ ] ^ " ~ * ? : \\ /``) so ``term`` is searched
    as text."""
    return LUCENE_SPECIAL.sub(r"\\\1", term)


def keyword_query(keywords: Iterable[str]) -> str:
    """Lucene query matching any of ``keywords``, each as an escaped quoted
    phrase; ``""`` when no keyword has visible characters."""
    phrases = [f'"{escape_lucene(k)}"' for k in _clean_keywords(keywords)]
    return " OR ".join(phrases)


def heading_keys(name: str, title_aliases: Callable[[str], Iterable[str]] = lambda title: ()) -> list[str]:
    """Keys a Heading name is matched by exactly: the name itself and its
    aliases under the collection's domain pack (``title_aliases``; law_zh:
    a law named ``中华人民共和国X`` is also ``X``)."""
    key = name_key(name)
    keys = [key]
    for alias in title_aliases(key):
        alias = name_key(alias)
        if alias and alias not in keys:
            keys.append(alias)
    return keys


def _clean_keywords(keywords: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for k in keywords:
        k = " ".join(str(k).split())
        if k and k not in seen:
            seen[k] = None
    return list(seen)


def document_headings(doc: DocumentRecord) -> list[tuple[str, str, int]]:
    """The Heading nodes above ``doc``, outermost first, as (id, name, level).

    Level 1 is the outermost heading. The last heading is the document's
    parent. Ids are the path joined with "/", prefixed with the collection
    and COLLECTION_SEPARATOR outside the default collection."""
    path = [" ".join(p.split()) for p in doc.heading_path if p and p.strip()]
    names = path[:-1]
    if not names and doc.title.strip():
        names = [" ".join(doc.title.split())]
    collection = getattr(doc, "collection", DEFAULT_COLLECTION) or DEFAULT_COLLECTION
    scope = "" if collection == DEFAULT_COLLECTION else collection + COLLECTION_SEPARATOR
    headings = []
    for i, name in enumerate(names):
        headings.append((scope + HEADING_SEPARATOR.join(names[: i + 1]), name, i + 1))
    return headings


def _search_text(heading_path: list[str], text: str) -> str:
    return f"{' '.join(heading_path)}\n{text}"


@dataclass(slots=True)
class _Row:
    """A retrieved chunk before it becomes a Hit."""

    chunk_id: str
    document_id: str
    title: str
    heading_path: list[str]
    text: str
    ordinal: int
    collection: str = DEFAULT_COLLECTION
    metadata: dict[str, str] | None = None

    def hit(self, channel: str, score: float, evidence: str) -> Hit:
        return Hit(
            chunk_id=self.chunk_id,
            document_id=self.document_id,
            title=self.title,
            heading_path=list(self.heading_path),
            text=self.text,
            ordinal=self.ordinal,
            channel=channel,
            score=float(score),
            evidence=evidence,
            collection=self.collection,
            metadata=dict(self.metadata or {}),
        )


def _row(record: Any) -> _Row:
    return _Row(
        chunk_id=record["chunk_id"],
        document_id=record["document_id"],
        title=record["title"] or "",
        heading_path=list(record["heading_path"] or []),
        text=record["text"] or "",
        ordinal=int(record["ordinal"] or 0),
        collection=record["collection"],
        metadata={**json.loads(record["document_metadata"] or "{}"), **json.loads(record["chunk_metadata"] or "{}")},
    )


_HIT_FIELDS = """
    c.id AS chunk_id, d.id AS document_id, d.title AS title,
    c.heading_path AS heading_path, c.text AS text, c.ordinal AS ordinal,
    coalesce(d.collection, 'default') AS collection, c.metadata AS chunk_metadata, d.metadata AS document_metadata
"""

_EXISTING = """
UNWIND $ids AS id
MATCH (d:Document {id: id})
OPTIONAL MATCH (p:Heading)-[:PARENT_OF]->(d)
RETURN d.id AS id, d.content_hash AS hash, d.position AS position, p.id AS parent, d.graph_version AS graph_version,
       coalesce(d.collection, 'default') AS collection, d.metadata AS metadata
"""

_MERGE_HEADINGS = """
UNWIND $headings AS h
MERGE (x:Heading {id: h.id})
ON CREATE SET x.name = h.name, x.level = h.level, x.keys = h.keys, x.next_position = 0, x.collection = h.collection
"""

_MERGE_HEADING_EDGES = """
UNWIND $edges AS e
MATCH (p:Heading {id: e.parent}), (c:Heading {id: e.child})
MERGE (p)-[:PARENT_OF]->(c)
"""

# The first statement write-locks the headings, so the second reads the
# latest committed counters.
_LOCK_HEADINGS = """
UNWIND $ids AS id
MATCH (h:Heading {id: id})
SET h.next_position = coalesce(h.next_position, 0)
"""

_ALLOCATE_POSITIONS = """
UNWIND $groups AS g
MATCH (h:Heading {id: g.id})
WITH h, g, h.next_position AS base
SET h.next_position = base + g.n
RETURN h.id AS id, base
"""

_WRITE_DOCUMENTS = """
UNWIND $docs AS doc
MERGE (d:Document {id: doc.id})
SET d.title = doc.title, d.content_hash = doc.hash, d.heading_path = doc.heading_path,
    d.metadata = doc.metadata, d.position = doc.position, d.collection = doc.collection, d.source = doc.source,
    d.updated_ms = timestamp(), d.graph_version = $graph_version
SET d += doc.meta
WITH d, doc
CALL (d) {
  MATCH (d)-[:HAS_CHUNK]->(old:Chunk)
  DETACH DELETE old
}
CALL (d, doc) {
  MATCH (p:Heading)-[r:PARENT_OF]->(d)
  WHERE doc.parent IS NULL OR p.id <> doc.parent
  DELETE r
}
CALL (d, doc) {
  MATCH (p:Heading {id: doc.parent})
  MERGE (p)-[:PARENT_OF]->(d)
}
CALL (d, doc) {
  UNWIND doc.chunks AS ch
  CREATE (c:Chunk {id: ch.id, document_id: doc.id, ordinal: ch.ordinal, text: ch.text,
                   heading_path: ch.heading_path, parent_context: ch.parent_context,
                   search_text: ch.search_text, metadata: ch.metadata})
  CREATE (d)-[:HAS_CHUNK]->(c)
}
CALL (doc) {
  UNWIND range(0, size(doc.chunks) - 2) AS i
  MATCH (a:Chunk {id: doc.chunks[i].id}), (b:Chunk {id: doc.chunks[i + 1].id})
  CREATE (a)-[:NEXT]->(b)
}
"""

_HEADING_LOOKUP = """
CALL db.index.fulltext.queryNodes($index, $q) YIELD node AS h, score
WHERE h.collection IN $collections
WITH h, score LIMIT $limit
RETURN h.id AS id, h.name AS name, h.level AS level, score, [] AS keys
UNION ALL
MATCH (h:Heading) WHERE h.collection IN $collections
WITH h, [k IN h.keys WHERE size(k) >= 2 AND ($query_key CONTAINS k OR k IN $keyword_keys)] AS keys
WHERE size(keys) > 0
RETURN h.id AS id, h.name AS name, h.level AS level, 0.0 AS score, keys
"""

# Full-text hits over chunks, with the matching headings above each one. The
# first $ft_limit rows feed graph.fulltext; rows under a matched heading
# (from a deeper pool) feed graph.heading. The scope (SCOPE: collections and
# metadata conditions, filter_cypher) applies as the index yields, before
# the pool's limit.
_CHUNK_SEARCH = f"""
CALL db.index.fulltext.queryNodes($index, $q) YIELD node AS c, score
MATCH (d:Document)-[:HAS_CHUNK]->(c)
WHERE SCOPE
WITH c, d, score LIMIT $pool
WITH c, d, score,
     CASE WHEN size($heading_ids) = 0 THEN []
          ELSE [(h:Heading)-[:PARENT_OF*1..8]->(d) WHERE h.id IN $heading_ids | h.id] END AS heads
WITH collect({{c: c, d: d, score: score, heads: heads}}) AS rows
UNWIND range(0, size(rows) - 1) AS i
WITH i, rows[i] AS r
WHERE i < $ft_limit OR size(r.heads) > 0
WITH i, r.c AS c, r.d AS d, r.score AS score, r.heads AS heads
RETURN {_HIT_FIELDS}, score, heads, i < $ft_limit AS in_fulltext,
       [k IN $keywords WHERE toLower(c.search_text) CONTAINS toLower(k)] AS matched
ORDER BY i
"""

# Reading-order neighbours of chunks: the previous/next chunk of the same
# document, else the last chunk of the previous article / the first chunk of
# the next article under the same heading.
_NEIGHBOURS = f"""
UNWIND $sources AS src
MATCH (s:Chunk {{id: src}})<-[:HAS_CHUNK]-(sd:Document)
CALL (s, sd) {{
  MATCH (c:Chunk)-[:NEXT]->(s) RETURN c
  UNION
  MATCH (s)-[:NEXT]->(c:Chunk) RETURN c
  UNION
  MATCH (s) WHERE NOT EXISTS {{ (:Chunk)-[:NEXT]->(s) }}
  MATCH (h:Heading)-[:PARENT_OF]->(sd), (h)-[:PARENT_OF]->(nd:Document)
  WHERE nd.position = sd.position - 1
  MATCH (nd)-[:HAS_CHUNK]->(c:Chunk)
  WHERE NOT EXISTS {{ (c)-[:NEXT]->(:Chunk) }}
  RETURN c
  UNION
  MATCH (s) WHERE NOT EXISTS {{ (s)-[:NEXT]->(:Chunk) }}
  MATCH (h:Heading)-[:PARENT_OF]->(sd), (h)-[:PARENT_OF]->(nd:Document)
  WHERE nd.position = sd.position + 1
  MATCH (nd)-[:HAS_CHUNK]->(c:Chunk)
  WHERE NOT EXISTS {{ (:Chunk)-[:NEXT]->(c) }}
  RETURN c
}}
MATCH (d:Document)-[:HAS_CHUNK]->(c)
WHERE SCOPE
RETURN src AS source, {_HIT_FIELDS}
"""


class GraphStore:
    """Chunks of documents in Neo4j under their heading tree, searched by
    heading names, Chinese full text and reading-order neighbours.

    Args:
        uri: Bolt or Neo4j URI, e.g. ``bolt://127.0.0.1:7687``.
        user, password: basic auth; no auth when ``user`` is None.
        database: database name.
        batch_size: documents per write transaction.
        heading_limit: heading full-text matches considered per query.
        heading_pool: full-text chunk hits searched for chunks under a
            matched heading.
        neighbour_sources: top hits whose neighbours are added.
        max_retry_seconds: how long the driver retries a failed transaction
            (connection lost, leader switch) before raising; short, so a
            Neo4j that is down fails a request at once instead of holding it
            (the driver's default is 30 s).
        budget: how long a transaction may run (the RPC's remaining
            deadline, read ceiling); default ``QueryBudget()`` (30 s reads).
        connection_timeout: seconds to open a connection (driver default 30).
        connection_acquisition_timeout: seconds to get a pooled connection,
            opening included (driver default 60).
        liveness_check_timeout: a pooled connection idle longer than this
            (seconds) is checked before use, so one that died with a
            restarted server is replaced instead of failing a query (driver
            default: never checked).
        max_connection_lifetime: seconds a connection is used at most
            (driver default 3600).
        retry_delay: first wait of the driver's retry of a failed
            transaction, seconds (driver default 1 s, which alone would use
            up ``max_retry_seconds``).
    """

    def __init__(
        self,
        uri: str,
        user: str | None = None,
        password: str | None = None,
        database: str = "neo4j",
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        heading_limit: int = 10,
        heading_pool: int = 2000,
        neighbour_sources: int = 3,
        max_retry_seconds: float = 1.0,
        budget: QueryBudget | None = None,
        connection_timeout: float = 2.0,
        connection_acquisition_timeout: float = 5.0,
        liveness_check_timeout: float = 2.0,
        max_connection_lifetime: float = 600.0,
        retry_delay: float = 0.1,
    ) -> None:
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        self.uri = uri
        self.database = database
        self.batch_size = batch_size
        self.heading_limit = heading_limit
        self.heading_pool = heading_pool
        self.neighbour_sources = neighbour_sources
        self._auth = (user, password or "") if user is not None else None
        self.max_retry_seconds = max_retry_seconds
        self.budget = budget or QueryBudget()
        self._pool_options = {
            "connection_timeout": connection_timeout,
            "connection_acquisition_timeout": connection_acquisition_timeout,
            "liveness_check_timeout": liveness_check_timeout,
            "max_connection_lifetime": max_connection_lifetime,
            "initial_retry_delay": retry_delay,
        }
        self._driver: AsyncDriver | None = None
        self._laws: set[str] | None = None  # law keys stored, for bare law names in references
        self._chunk_index_online = False
        self._chunk_index_lock = asyncio.Lock()

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Creates the driver and checks that the server answers."""
        if self._driver is not None:
            return
        driver = AsyncGraphDatabase.driver(
            self.uri,
            auth=self._auth,
            max_transaction_retry_time=self.max_retry_seconds,
            **self._pool_options,
            # An empty graph names unknown labels and types in every query,
            # and IF NOT EXISTS reports existing indexes: not worth a log line.
            notifications_disabled_classifications=[
                NotificationDisabledClassification.UNRECOGNIZED,
                NotificationDisabledClassification.SCHEMA,
                NotificationDisabledClassification.PERFORMANCE,
            ],
        )
        try:
            await driver.verify_connectivity()
        except BaseException:
            await driver.close()
            raise
        self._driver = driver

    async def close(self) -> None:
        """Closes the driver; the store can be opened again."""
        if self._driver is not None:
            driver, self._driver = self._driver, None
            await driver.close()

    async def __aenter__(self) -> "GraphStore":
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def driver(self) -> AsyncDriver:
        if self._driver is None:
            raise RuntimeError("GraphStore is not open; call open() first")
        return self._driver

    async def _query(self, query: str, params: dict[str, Any] | None = None, *, write: bool = False) -> list:
        """Records of ``query`` run as one transaction bounded by
        ``self.budget`` (reads: the RPC's remaining deadline, at most the
        read ceiling; ``write``: the deadline only).

        Raises:
            StoreTimeout: Neo4j terminated it at that bound.
            neo4j.exceptions.Neo4jError / DriverError: the query failed.
        """
        seconds = bound(self.budget, write)
        with translate_timeouts(seconds):
            result = await self.driver.execute_query(
                timed(query, seconds),
                parameters_=params or {},
                routing_=RoutingControl.WRITE if write else RoutingControl.READ,
                database_=self.database,
            )
        return result.records

    async def _read_work(self, work: Any, *args: Any) -> Any:
        """``session.execute_read(work, *args)`` bounded like ``_query``."""
        seconds = bound(self.budget)
        with translate_timeouts(seconds):
            async with self.driver.session(database=self.database) as session:
                return await session.execute_read(timed_work(work, seconds), *args)

    async def _write_work(self, work: Any, *args: Any) -> Any:
        """``session.execute_write(work, *args)`` bounded by the deadline."""
        seconds = bound(self.budget, write=True)
        with translate_timeouts(seconds):
            async with self.driver.session(database=self.database) as session:
                return await session.execute_write(timed_work(work, seconds), *args)

    # -- schema --------------------------------------------------------------

    async def migrate(self) -> None:
        """Creates the uniqueness constraints and the heading names' ``cjk``
        full-text index, and waits until they are online. The chunks' index
        is left to the first search that needs it (``ensure_chunk_index``).
        Idempotent; a full-text index found with another analyzer is dropped
        and recreated (the chunks' on its next search)."""
        for statement in (*_CONSTRAINTS, *doc_graph.SCHEMA):
            await self._query(statement, write=True)
        await self._query(_RECORD_LEGACY_COLLECTIONS, {"pack": _LEGACY_COLLECTION_PACK}, write=True)
        existing = {
            r["name"]: r["options"]
            for r in await self._query(
                "SHOW INDEXES YIELD name, type, options WHERE type = 'FULLTEXT' RETURN name, options"
            )
        }
        for name, statement in _FULLTEXT_INDEXES.items():
            options = existing.get(name)
            if options is not None:
                analyzer = (options.get("indexConfig") or {}).get("fulltext.analyzer")
                if analyzer != FULLTEXT_ANALYZER:
                    log.warning("recreating full-text index %s (analyzer %s)", name, analyzer)
                    await self._query(f"DROP INDEX {name}", write=True)
                    options = None
            if name == CHUNK_INDEX:
                self._chunk_index_online = False
                if options is None:
                    continue
            await self._query(statement, write=True)
        # write=True: maintenance, not bounded by the read ceiling.
        await self._query("CALL db.awaitIndexes(300)", write=True)
        await self._upgrade_collections()

    async def ensure_chunk_index(self, wait_s: float = CHUNK_INDEX_WAIT_S) -> None:
        """Makes sure the chunks' full-text index exists and is online:
        creates it when missing (Neo4j populates it in the background) and
        waits up to ``wait_s`` seconds for it.

        Raises:
            ChunkIndexBuilding: still populating after ``wait_s``.
            RuntimeError: Neo4j reports the index FAILED.
        """
        if self._chunk_index_online:
            return
        async with self._chunk_index_lock:
            if self._chunk_index_online:
                return
            await self._query(_FULLTEXT_INDEXES[CHUNK_INDEX], write=True)
            give_up = time.monotonic() + wait_s
            while True:
                state, percent = await self._chunk_index_state()
                if state == "ONLINE":
                    self._chunk_index_online = True
                    return
                if state == "FAILED":
                    raise RuntimeError(f"Neo4j could not build the full-text index {CHUNK_INDEX}")
                if time.monotonic() >= give_up:
                    raise ChunkIndexBuilding(f"building the chunks' full-text index ({percent:.0f}%)")
                await asyncio.sleep(0.05)

    async def chunk_index_online(self) -> bool:
        """Whether the chunks' full-text index exists and is online (without
        creating it)."""
        if not self._chunk_index_online:
            self._chunk_index_online = (await self._chunk_index_state())[0] == "ONLINE"
        return self._chunk_index_online

    async def _chunk_index_state(self) -> tuple[str, float]:
        """(state, population percent) of the chunks' index; ("MISSING", 0.0)
        when it does not exist."""
        rows = await self._query(_INDEX_STATE, {"name": CHUNK_INDEX})
        return (rows[0]["state"], float(rows[0]["populationPercent"])) if rows else ("MISSING", 0.0)

    async def _upgrade_collections(self) -> int:
        """Puts nodes stored before collections into "default": Documents
        (with their ``meta.<key>`` properties from the metadata JSON) and
        Headings, a batch per transaction. Returns the documents upgraded."""
        upgraded = 0
        while True:
            rows = await self._query(
                "MATCH (d:Document) WHERE d.collection IS NULL RETURN d.id AS id, d.metadata AS metadata LIMIT $n",
                {"n": _MIGRATE_BATCH})
            if not rows:
                break
            payload = [{"id": r["id"], "props": {"collection": DEFAULT_COLLECTION, "source": "",
                                                 **meta_properties(json.loads(r["metadata"] or "{}"))}} for r in rows]
            await self._query("UNWIND $rows AS r MATCH (d:Document {id: r.id}) SET d += r.props", {"rows": payload}, write=True)
            upgraded += len(rows)
        while (await self._query(
                "MATCH (h:Heading) WHERE h.collection IS NULL WITH h LIMIT $n SET h.collection = 'default' RETURN count(h) AS n",
                {"n": _MIGRATE_BATCH * 4}, write=True))[0]["n"]:
            pass
        if upgraded:
            log.info("put %d documents stored before collections into %r", upgraded, DEFAULT_COLLECTION)
        return upgraded

    # -- ingestion -----------------------------------------------------------

    async def ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult:
        """Stores documents with their chunks and headings.

        Writes batches of ``batch_size`` documents, one transaction each. A
        document whose id and content hash are already stored is left alone
        (counted as unchanged); a changed one has its chunks replaced. When a
        batch fails, its documents are retried one per transaction, so a bad
        document is reported in ``failures`` and the others are stored.

        Raises:
            neo4j.exceptions.DriverError: the server could not be reached
                (e.g. ``ServiceUnavailable``); batches committed before stay.
        """
        result = IngestResult()
        for start in range(0, len(docs), self.batch_size):
            batch = list(enumerate(docs[start : start + self.batch_size], start))
            try:
                stored, unchanged = await self._write(batch)
            except (DriverError, StoreTimeout):
                raise  # connection lost, driver misuse or out of time: not the documents' fault
            except Exception as exc:  # noqa: BLE001 - fall back to one by one
                log.warning("batch at %d failed (%s); retrying one by one", start, exc)
                for index, doc in batch:
                    try:
                        stored, unchanged = await self._write([(index, doc)])
                    except (DriverError, StoreTimeout):
                        raise
                    except Exception as one_exc:  # noqa: BLE001 - reported to the caller
                        result.failures.append(
                            IngestFailureRecord(index=index, id=str(doc.id), reason=_reason(one_exc))
                        )
                    else:
                        result.stored += stored
                        result.unchanged += unchanged
            else:
                result.stored += stored
                result.unchanged += unchanged
        return result

    async def _write(self, batch: list[tuple[int, DocumentRecord]]) -> tuple[int, int]:
        docs = [doc for _, doc in batch]
        ids = [doc.id for doc in docs]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate document ids in one batch")
        for doc in docs:
            _validate(doc)
        if self._laws is None:
            self._laws = await self._read_work(doc_graph.known_laws)
        facts: list = []
        written = await self._write_work(_write_batch, docs, self._laws, facts)
        self._laws |= {f.law for f in facts if f.law}
        return written

    # -- retrieval -----------------------------------------------------------

    async def retrieve(self, query: str, keywords: list[str], top_k: int,
                       channels: Collection[str] = ALL_CHANNELS, collections: Collection[str] = (DEFAULT_COLLECTION,),
                       conditions: Collection[Condition] = ()) -> list[Hit]:
        """Finds chunks for a query through three channels, among the
        documents of ``collections`` meeting ``conditions`` (headings of
        those collections; the scope applies before every limit).

        - ``graph.heading``: headings whose name full-text matches a keyword,
          or whose name (or a law name without ``中华人民共和国``) equals a
          keyword or appears in the query; their chunks that also full-text
          match the keywords. Score: the chunk's full-text score times
          ``1 + w``, ``w`` = 1 for an exact name match, else 0.5 times the
          heading's full-text score relative to the best heading. Evidence
          ``heading:<name>``.
        - ``graph.fulltext``: full-text search of the keywords over heading
          path + chunk text. Score: Lucene's. Evidence: the keywords the chunk
          contains, space separated.
        - ``graph.neighbour``: reading-order neighbours of the best hits (the
          previous/next chunk, across article boundaries under the same
          heading). Score: half the source's. Evidence
          ``neighbour-of:<chunk id>``.

        A chunk found by several channels keeps its best-scored hit. Only the
        ``channels`` named run: without graph.heading no heading lookup is
        made, without graph.fulltext the chunk search feeds headings only,
        without both nothing is searched. Returns at most ``2 * top_k``
        hits, best first; ``[]`` when ``keywords`` has no usable keyword or
        ``top_k`` < 1.

        Raises:
            ChunkIndexBuilding: the chunks' full-text index, built on the
                store's first such search, is not online yet
                (``ensure_chunk_index``).
        """
        clean = _clean_keywords(keywords)
        lucene = keyword_query(clean)
        if not lucene or top_k < 1:
            return []
        limit = 2 * top_k
        use_heading, use_fulltext = CHANNEL_HEADING in channels, CHANNEL_FULLTEXT in channels
        if not (use_heading or use_fulltext):
            return []
        await self.ensure_chunk_index()

        headings = await self._matching_headings(query, clean, lucene, list(collections)) if use_heading else {}
        if use_heading and not headings and not use_fulltext:
            return []
        scope_params: dict[str, Any] = {}
        scope = scope_cypher(list(collections), list(conditions), scope_params)
        records = await self._search_chunks(
            _CHUNK_SEARCH.replace("SCOPE", scope),
            {
                "index": CHUNK_INDEX,
                "q": lucene,
                "pool": max(self.heading_pool, limit) if headings else limit,
                "ft_limit": limit if use_fulltext else 0,
                "heading_ids": list(headings),
                "keywords": clean,
                **scope_params,
            },
        )
        best: dict[str, Hit] = {}
        for record in records:
            row = _row(record)
            score = float(record["score"])
            if record["in_fulltext"]:
                evidence = " ".join(record["matched"]) or " ".join(clean)
                _keep(best, row.hit(CHANNEL_FULLTEXT, score, evidence))
            if record["heads"]:
                head = max((headings[h] for h in record["heads"]), key=lambda m: (m.weight, m.level))
                _keep(best, row.hit(CHANNEL_HEADING, score * (1.0 + head.weight), f"heading:{head.name}"))

        ranked = sorted(best.values(), key=_order)
        sources = ranked[: self.neighbour_sources] if CHANNEL_NEIGHBOUR in channels else []
        if sources:
            score_of = {h.chunk_id: h.score for h in sources}
            for record in await self._query(_NEIGHBOURS.replace("SCOPE", scope), {"sources": list(score_of), **scope_params}):
                source = record["source"]
                _keep(
                    best,
                    _row(record).hit(CHANNEL_NEIGHBOUR, 0.5 * score_of[source], f"neighbour-of:{source}"),
                )
        return sorted(best.values(), key=_order)[:limit]

    async def _search_chunks(self, query: str, params: dict[str, Any]) -> list:
        """Runs ``query`` over the chunks' full-text index. An index dropped
        since this store saw it online (an operator's DROP INDEX) is built
        again (``ensure_chunk_index``) and the query run once more.

        Raises:
            ChunkIndexBuilding: the index built again is not online yet.
        """
        try:
            return await self._query(query, params)
        except ClientError as error:
            if f"no such fulltext schema index: {CHUNK_INDEX}" not in (error.message or ""):
                raise
        log.warning("full-text index %s is gone; building it again", CHUNK_INDEX)
        self._chunk_index_online = False
        await self.ensure_chunk_index()
        return await self._query(query, params)

    async def _matching_headings(self, query: str, keywords: list[str], lucene: str,
                                 collections: list[str]) -> dict[str, "_Heading"]:
        records = await self._query(
            _HEADING_LOOKUP,
            {
                "collections": collections,
                "index": HEADING_INDEX,
                "q": lucene,
                "limit": self.heading_limit,
                "query_key": name_key(query),
                "keyword_keys": [name_key(k) for k in keywords],
            },
        )
        exact = {r["id"]: r for r in records if r["keys"]}
        # A name inside a longer matched name (保险法 in 社会保险法) is not
        # what the query names.
        matched = {hid: max(r["keys"], key=len) for hid, r in exact.items()}
        shadowed = {
            hid
            for hid, key in matched.items()
            if any(key != other and key in other for other in matched.values())
        }
        fulltext = [r for r in records if not r["keys"]]
        top = max((float(r["score"]) for r in fulltext), default=0.0) or 1.0
        found: dict[str, _Heading] = {}
        for r in fulltext:
            found[r["id"]] = _Heading(r["name"], int(r["level"] or 0), 0.5 * float(r["score"]) / top)
        for hid, r in exact.items():
            if hid not in shadowed:
                found[hid] = _Heading(r["name"], int(r["level"] or 0), 1.0)
        return found

    # -- lookups -------------------------------------------------------------

    async def document_hashes(self, ids: Iterable[str]) -> dict[str, str]:
        """Stored content hashes of the given document ids that exist and
        were linked into the document graph by the current parser
        (``DOCGRAPH_VERSION``); the others are absent, so an ingest sends
        them again and they are re-linked."""
        records = await self._query(
            "UNWIND $ids AS id MATCH (d:Document {id: id}) WHERE d.graph_version = $version "
            "RETURN d.id AS id, d.content_hash AS hash",
            {"ids": list(ids), "version": DOCGRAPH_VERSION},
        )
        return {r["id"]: r["hash"] for r in records}

    async def dangling_references(self) -> int:
        """Stored references (CITES/AMENDS) naming an article no stored
        document holds; they make no edge."""
        return await self._read_work(doc_graph.dangling_references)

    async def list_documents(self, ids: list[str], collections: list[str] | None, conditions: list[Condition],
                             page_size: int, after_id: str = "", with_chunks: bool = False) -> list[StoredDocumentInfo]:
        """Stored documents ordered by id (``lifecycle.list_documents``);
        without their chunks even ``with_chunks``: retriever_pg, the store
        of record, returns those."""
        return await list_documents(self, ids, collections, conditions, page_size, after_id)

    async def delete_documents(self, ids: list[str], collections: list[str] | None,
                               conditions: list[Condition]) -> Deletion:
        """Deletes documents with their chunks and the headings only they
        kept, in one transaction (``lifecycle.delete_documents``); the
        document graph's version is bumped so its lookup tables are rebuilt."""
        return await self._write_work(_delete_and_bump, ids, collections, conditions)

    async def collection_counts(self) -> dict[str, tuple[int, int]]:
        """{collection: (documents, chunks)}."""
        return await collection_counts(self)

    async def collection_packs(self) -> dict[str, str]:
        """{collection: domain pack} of every collection recorded."""
        return {r["name"]: r["pack"] or domains.DEFAULT_PACK
                for r in await self._query("MATCH (k:Collection) RETURN k.name AS name, k.domain_pack AS pack")}

    async def count_documents(self) -> int:
        """Number of stored documents."""
        records = await self._query("MATCH (d:Document) RETURN count(d) AS n")
        return int(records[0]["n"])


@dataclass(slots=True)
class _Heading:
    name: str
    level: int
    weight: float


def _order(hit: Hit) -> tuple[float, int, str]:
    return (-hit.score, _CHANNEL_RANK.get(hit.channel, 9), hit.chunk_id)


def _keep(best: dict[str, Hit], hit: Hit) -> None:
    current = best.get(hit.chunk_id)
    if current is None or _order(hit) < _order(current):
        best[hit.chunk_id] = hit


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:497] + "..."


def _validate(doc: DocumentRecord) -> None:
    if not isinstance(doc.id, str) or not doc.id:
        raise ValueError("document id must be a non-empty string")
    for chunk in doc.chunks:
        if chunk.document_id != doc.id:
            raise ValueError(f"chunk {chunk.id!r} belongs to {chunk.document_id!r}, not {doc.id!r}")


async def _write_batch(tx: AsyncManagedTransaction, docs: list[DocumentRecord], laws: set[str] | None = None,
                       facts_out: list | None = None) -> tuple[int, int]:
    """One transaction: records each collection's domain pack, skips
    unchanged documents, writes the others and links them into the document
    graph with the facts their collection's pack extracts (none for a pack
    without a fact extractor, e.g. generic). ``laws``: scope keys stored
    before; the facts written are appended to ``facts_out``.

    Raises:
        ValueError: a document names another pack than its collection's.
    """
    packs = await _collection_packs(tx, docs)
    result = await tx.run(_EXISTING, ids=[d.id for d in docs])
    existing = {r["id"]: r async for r in result}

    to_write: list[tuple[DocumentRecord, list[tuple[str, str, int]]]] = []
    unchanged = 0
    for doc in docs:
        old = existing.get(doc.id)
        collection = doc.collection or DEFAULT_COLLECTION
        if old is not None and old["collection"] != collection:
            raise ValueError(f"document id {doc.id!r} is stored in collection {old['collection']!r}; "
                             "delete it there first or give another id (the record's own id; for files, "
                             "graphmesh ingest files --id-prefix)")
        if old is not None and old["hash"] == doc.content_hash and old["graph_version"] == DOCGRAPH_VERSION:
            unchanged += 1
        else:
            to_write.append((doc, document_headings(doc)))
    if not to_write:
        return 0, unchanged

    headings: dict[str, dict[str, Any]] = {}
    edges: dict[tuple[str, str], None] = {}
    for doc, path in to_write:
        aliases = domains.get_pack(packs[doc.collection or DEFAULT_COLLECTION]).title_aliases
        for i, (hid, name, level) in enumerate(path):
            headings.setdefault(hid, {"id": hid, "name": name, "level": level, "keys": heading_keys(name, aliases),
                                      "collection": doc.collection or DEFAULT_COLLECTION})
            if i:
                edges[(path[i - 1][0], hid)] = None
    if headings:
        await (await tx.run(_MERGE_HEADINGS, headings=list(headings.values()))).consume()
    if edges:
        await (
            await tx.run(_MERGE_HEADING_EDGES, edges=[{"parent": p, "child": c} for p, c in edges])
        ).consume()

    # Keep a document's position while it stays under the same heading.
    positions: dict[str, int | None] = {}
    needs: dict[str, list[str]] = {}
    for doc, path in to_write:
        parent = path[-1][0] if path else None
        old = existing.get(doc.id)
        if parent is None:
            positions[doc.id] = None
        elif old is not None and old["parent"] == parent and old["position"] is not None:
            positions[doc.id] = int(old["position"])
        else:
            needs.setdefault(parent, []).append(doc.id)
    if needs:
        await (await tx.run(_LOCK_HEADINGS, ids=list(needs))).consume()
        result = await tx.run(_ALLOCATE_POSITIONS, groups=[{"id": h, "n": len(d)} for h, d in needs.items()])
        bases = {r["id"]: int(r["base"]) async for r in result}
        for hid, doc_ids in needs.items():
            for offset, doc_id in enumerate(doc_ids):
                positions[doc_id] = bases[hid] + offset

    rows = []
    for doc, path in to_write:
        chunks = sorted(doc.chunks, key=lambda c: c.ordinal)
        rows.append(
            {
                "id": doc.id,
                "title": doc.title,
                "hash": doc.content_hash,
                "heading_path": list(doc.heading_path),
                "metadata": json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True),
                "meta": meta_properties(doc.metadata, _old_metadata(existing.get(doc.id))),
                "collection": doc.collection or DEFAULT_COLLECTION,
                "source": doc.source,
                "position": positions[doc.id],
                "parent": path[-1][0] if path else None,
                "chunks": [
                    {
                        "id": c.id,
                        "ordinal": c.ordinal,
                        "text": c.text,
                        "heading_path": list(c.heading_path),
                        "parent_context": c.parent_context,
                        "search_text": _search_text(c.heading_path, c.text),
                        "metadata": json.dumps(c.metadata, ensure_ascii=False, sort_keys=True) if c.metadata else None,
                    }
                    for c in chunks
                ],
            }
        )
    await (await tx.run(_WRITE_DOCUMENTS, docs=rows, graph_version=DOCGRAPH_VERSION)).consume()
    # Headings a rewritten document left, kept only while something is under them.
    left = [old["parent"] for doc, path in to_write if (old := existing.get(doc.id)) is not None and old["parent"]
            and old["parent"] != (path[-1][0] if path else None)]
    if left:
        await prune_headings(tx, left)
    facts = []
    for doc, _ in to_write:
        extract = domains.get_pack(packs[doc.collection or DEFAULT_COLLECTION]).document_facts
        if extract is not None:
            found = extract(doc)
            found.collection = doc.collection or DEFAULT_COLLECTION
            facts.append(found)
    stats = await link_documents(tx, facts, laws)
    if not facts:  # link_documents bumps the version only when it links something
        await doc_graph.bump_version(tx, facts_changed=False)
    if facts_out is not None:
        facts_out.extend(facts)
    log.debug("document graph: %s", stats)
    return len(to_write), unchanged


_COLLECTION_PACKS = """
UNWIND $collections AS c
MERGE (k:Collection {name: c.name})
ON CREATE SET k.domain_pack = c.pack
RETURN k.name AS name, k.domain_pack AS pack
"""


async def _collection_packs(tx: AsyncManagedTransaction, docs: list[DocumentRecord]) -> dict[str, str]:
    """{collection: pack} of the collections of ``docs``: a new collection
    gets the pack its documents name (the default pack when they name
    none); an existing one keeps its own.

    Raises:
        ValueError: a document names another pack than its collection's,
            or an unknown pack.
    """
    wanted: dict[str, str] = {}
    for doc in docs:
        collection = doc.collection or DEFAULT_COLLECTION
        if doc.domain_pack:
            domains.get_pack(doc.domain_pack)  # UnknownPack is a ValueError
        wanted.setdefault(collection, doc.domain_pack)
        if doc.domain_pack and wanted[collection] and wanted[collection] != doc.domain_pack:
            raise ValueError(f"documents of collection {collection!r} name two packs")
    rows = [{"name": c, "pack": p or domains.DEFAULT_PACK} for c, p in wanted.items()]
    result = await tx.run(_COLLECTION_PACKS, collections=rows)
    recorded = {r["name"]: r["pack"] or domains.DEFAULT_PACK async for r in result}
    for collection, pack in wanted.items():
        if pack and recorded[collection] != pack:
            raise ValueError(f"collection {collection!r} uses the {recorded[collection]!r} domain pack, not {pack!r}")
    return recorded


async def _delete_and_bump(tx: AsyncManagedTransaction, ids: list[str], collections: list[str] | None,
                           conditions: list[Condition]) -> Deletion:
    """``lifecycle.delete_documents``, then a document-graph version bump
    when anything was deleted (the lookup tables then drop the documents)."""
    deleted = await delete_documents(tx, ids, collections, conditions)
    if deleted.documents:
        await doc_graph.bump_version(tx)
    if collections:  # a collection left without documents forgets its pack
        await (await tx.run(_DROP_EMPTY_COLLECTIONS, names=list(collections))).consume()
    return deleted


def _old_metadata(old: Any) -> dict[str, str]:
    """The metadata a stored document had (from _EXISTING), {} when new."""
    return json.loads(old["metadata"] or "{}") if old is not None else {}
