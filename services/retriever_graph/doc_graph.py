"""The document graph in Neo4j: edges found in the corpus's own text.

Graph model (beside the heading tree of ``store.py``)::

    (:Document {law_key, article_key, status, current, offences, graph_version})
    (:Document)-[:AT]->(:ArticleKey {key: "default/刑法#234"}) one slot per collection + law + article number
    (:Document)-[:REFERS {rel, kind, chunk_id, line}]->(:ArticleKey)   every parsed reference
    (:Document)-[:CITES {key, kind, chunk_id, line}]->(:Document)      resolved cross-reference
    (:Document)-[:AMENDS {key, kind, chunk_id, line}]->(:Document)     amendment item -> article
    (:Document)-[:VERSION_OF {chunk_id, similarity}]->(:Document)     non-current -> current version
    (:Document)-[:DEFINES {chunk_id, kind}]->(:Term {key, name, law, collection, definition, kind})
    (:Document)-[:MENTIONS]->(:Term)                                  same-law use of a defined term
    (:GraphMeta {id: "docgraph", version, facts_version})             bumped by every write (facts_version: when facts change)

Keys and terms belong to one collection (the document's), so every edge
stays inside its collection: a citation never resolves into another
collection's copy of a law. A key no document is at or refers to is
deleted with the last document that held it.

References are stored against the ArticleKey they name, so they resolve
whatever order documents arrive in: after each write the CITES and AMENDS
edges into every affected key are rebuilt. A reference resolves to the
version of the same status as the citing document (a historical law cites
its own historical articles), else the current version(s), else every
stored version. A reference to a key no document holds is dangling: it
makes no edge and is counted (``dangling_references``). Every edge keeps
its provenance chunk id.

All Cypher takes data as parameters.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from neo4j import AsyncManagedTransaction

from domains.facts import DOCGRAPH_VERSION, DocFacts, Version, key_of, resolve_hints, term_key, version_pairs

log = logging.getLogger(__name__)

SCHEMA = (
    "CREATE CONSTRAINT graph_article_key IF NOT EXISTS FOR (k:ArticleKey) REQUIRE k.key IS UNIQUE",
    "CREATE CONSTRAINT graph_term_key IF NOT EXISTS FOR (t:Term) REQUIRE t.key IS UNIQUE",
    "CREATE CONSTRAINT graph_meta_id IF NOT EXISTS FOR (m:GraphMeta) REQUIRE m.id IS UNIQUE",
    "CREATE INDEX graph_document_law IF NOT EXISTS FOR (d:Document) ON (d.law_key)",
    "CREATE INDEX graph_term_law IF NOT EXISTS FOR (t:Term) ON (t.law)",
)
META_ID = "docgraph"

_OLD_KEYS = """
UNWIND $ids AS id
MATCH (:Document {id: id})-[:AT]->(k:ArticleKey)
RETURN DISTINCT k.key AS key
"""

# Every key the documents point at (their own and the ones they refer to).
_TOUCHED_KEYS = """
UNWIND $ids AS id
MATCH (:Document {id: id})-[:AT|REFERS]->(k:ArticleKey)
RETURN DISTINCT k.key AS key
"""

# A key no document is at and none refers to any more is dropped.
_ORPHAN_KEYS = """
UNWIND $keys AS key
MATCH (k:ArticleKey {key: key})
WHERE NOT (k)--()
DELETE k
"""

_DROP_EDGES = """
UNWIND $ids AS id
MATCH (d:Document {id: id})
CALL (d) {
  MATCH (d)-[e:AT|REFERS|DEFINES|MENTIONS|CITES|AMENDS|VERSION_OF]->() DELETE e
}
CALL (d) {
  MATCH (d)<-[e:CITES|AMENDS|VERSION_OF]-() DELETE e
}
"""

_WRITE_FACTS = """
UNWIND $docs AS f
MATCH (d:Document {id: f.id})
SET d.law_key = f.law, d.article_key = f.article, d.status = f.status, d.current = f.current,
    d.offences = f.offences, d.graph_version = $version
WITH d, f
FOREACH (_ IN CASE WHEN f.key <> '' THEN [1] ELSE [] END |
  MERGE (k:ArticleKey {key: f.key})
  MERGE (d)-[:AT]->(k))
WITH d, f
CALL (d, f) {
  UNWIND f.refs AS r
  MERGE (k:ArticleKey {key: r.key})
  CREATE (d)-[:REFERS {rel: r.rel, kind: r.kind, chunk_id: r.chunk_id, line: r.line}]->(k)
}
CALL (d, f) {
  UNWIND f.terms AS t
  MERGE (x:Term {key: t.key})
  ON CREATE SET x.name = t.name, x.law = f.law, x.collection = f.collection, x.definition = t.definition,
                x.kind = t.kind, x.fresh = true
  FOREACH (_ IN CASE WHEN f.current THEN [1] ELSE [] END |
    SET x.definition = t.definition, x.kind = t.kind)
  CREATE (d)-[:DEFINES {chunk_id: t.chunk_id, kind: t.kind}]->(x)
}
"""

_UNMATERIALISE = """
UNWIND $keys AS key
MATCH (:ArticleKey {key: key})<-[:AT]-(t:Document)
CALL (t) {
  MATCH (t)<-[e:CITES|AMENDS]-() DELETE e
}
CALL (t) {
  MATCH (t)-[e:VERSION_OF]-() DELETE e
}
"""

# How a REFERS edge becomes a CITES/AMENDS edge: the target versions of the
# same status as the source, else the current ones, else all.
_CHOOSE_AND_CREATE = """
WITH s, r, k.key AS key, collect(t) AS found
WITH s, r, key, found, [t IN found WHERE t.status = s.status] AS same, [t IN found WHERE t.current] AS cur
UNWIND CASE WHEN size(same) > 0 THEN same WHEN size(cur) > 0 THEN cur ELSE found END AS t
FOREACH (_ IN CASE WHEN r.rel = 'CITES' THEN [1] ELSE [] END |
  CREATE (s)-[:CITES {key: key, kind: r.kind, chunk_id: r.chunk_id, line: r.line}]->(t))
FOREACH (_ IN CASE WHEN r.rel = 'AMENDS' THEN [1] ELSE [] END |
  CREATE (s)-[:AMENDS {key: key, kind: r.kind, chunk_id: r.chunk_id, line: r.line}]->(t))
RETURN r.rel AS rel, count(*) AS n
"""

# References into the keys whose versions changed, from any document.
_MATERIALISE = """
UNWIND $keys AS key
MATCH (k:ArticleKey {key: key})<-[r:REFERS]-(s:Document)
MATCH (k)<-[:AT]-(t:Document)
WHERE t <> s
""" + _CHOOSE_AND_CREATE

# The batch's own references into every other key.
_MATERIALISE_OUT = """
UNWIND $ids AS id
MATCH (s:Document {id: id})-[r:REFERS]->(k:ArticleKey)
WHERE NOT k.key IN $keys
MATCH (k)<-[:AT]-(t:Document)
WHERE t <> s
""" + _CHOOSE_AND_CREATE

_VERSIONS = """
UNWIND $keys AS key
MATCH (k:ArticleKey {key: key})<-[:AT]-(d:Document)
WITH k, collect(d) AS docs
WHERE size(docs) > 1
UNWIND docs AS d
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk)
WITH k, d, c ORDER BY c.ordinal
WITH k, d, collect(c) AS chunks
RETURN k.key AS key, d.id AS id, d.status AS status, d.current AS current,
       reduce(s = '', c IN chunks | s + c.text) AS text, chunks[0].id AS first_chunk
"""

_WRITE_VERSIONS = """
UNWIND $pairs AS p
MATCH (old:Document {id: p.old}), (new:Document {id: p.new})
CREATE (old)-[:VERSION_OF {chunk_id: p.chunk_id, similarity: p.similarity}]->(new)
"""

_LAW_TERMS = """
UNWIND $groups AS g
MATCH (t:Term {law: g.law, collection: g.collection})
RETURN t.key AS key, t.name AS name, t.law AS law, t.collection AS collection
"""

_WRITE_MENTIONS = """
UNWIND $pairs AS p
MATCH (d:Document {id: p.doc}), (t:Term {key: p.term})
MERGE (d)-[:MENTIONS]->(t)
"""

# Documents of the same law, outside the batch, that use a term new in this batch.
_MENTIONS_OF_NEW_TERMS = """
MATCH (t:Term {fresh: true})
REMOVE t.fresh
WITH t
MATCH (d:Document {law_key: t.law})-[:HAS_CHUNK]->(c:Chunk)
WHERE coalesce(d.collection, 'default') = t.collection AND NOT d.id IN $ids AND c.text CONTAINS t.name
  AND NOT (d)-[:DEFINES]->(t)
MERGE (d)-[:MENTIONS]->(t)
"""

_ORPHAN_TERMS = "MATCH (t:Term) WHERE NOT (t)<-[:DEFINES]-() DETACH DELETE t"

_KNOWN_LAWS = "MATCH (d:Document) WHERE d.law_key IS NOT NULL AND d.law_key <> '' RETURN DISTINCT d.law_key AS law"

# version: any change of the stored documents; facts_version: a change of
# the facts the packs' lookup tables are built from.
_BUMP = """
MERGE (m:GraphMeta {id: $id})
SET m.version = coalesce(m.version, 0) + 1,
    m.facts_version = coalesce(m.facts_version, 0) + CASE WHEN $facts THEN 1 ELSE 0 END
RETURN m.version AS version
"""

_DANGLING = """
MATCH (k:ArticleKey)<-[r:REFERS]-()
WHERE NOT (k)<-[:AT]-()
RETURN count(r) AS n
"""


@dataclass(slots=True)
class LinkStats:
    """Edges made by one link call, and references dropped."""

    cites: int = 0
    amends: int = 0
    versions: int = 0
    terms: int = 0
    dropped_hints: int = 0
    extra: dict[str, int] = field(default_factory=dict)


async def _records(tx: AsyncManagedTransaction, query: str, **params: Any) -> list:
    result = await tx.run(query, **params)
    return [r async for r in result]


def _fact_row(f: DocFacts) -> dict[str, Any]:
    return {
        "id": f.id, "law": f.law, "article": f.article, "status": f.status, "current": f.current, "key": f.key,
        "offences": f.offences, "collection": f.collection,
        "refs": [{"key": key_of(r.law, r.article, f.collection), "rel": r.rel, "kind": r.kind, "chunk_id": r.chunk_id,
                  "line": r.line} for r in f.refs],
        "terms": [{"key": term_key(f.law, t.name, f.collection), "name": t.name, "definition": t.definition,
                   "kind": t.kind, "chunk_id": t.chunk_id} for t in f.terms],
    }


async def known_laws(tx: AsyncManagedTransaction) -> set[str]:
    """Law keys of the stored documents."""
    return {r["law"] for r in await _records(tx, _KNOWN_LAWS)}


async def link_documents(tx: AsyncManagedTransaction, facts: list[DocFacts], laws: set[str] | None = None) -> LinkStats:
    """Writes the document-graph part of ``facts`` (documents already
    written in this transaction): their properties, ArticleKey, parsed
    references and defined terms; rebuilds CITES and AMENDS into every key
    whose versions the batch changes (its documents' keys, old and new) and
    out of the batch's documents, VERSION_OF among those keys' documents,
    MENTIONS of the batch's documents and of terms new in it; then bumps
    the graph version.

    Args:
        laws: law keys already stored (bare law names resolve against them
            and the batch's laws); read from the store when None.
    """
    stats = LinkStats()
    if not facts:
        return stats
    ids = [f.id for f in facts]
    old_keys = {r["key"] for r in await _records(tx, _OLD_KEYS, ids=ids)}
    touched = {r["key"] for r in await _records(tx, _TOUCHED_KEYS, ids=ids)}
    await (await tx.run(_DROP_EDGES, ids=ids)).consume()

    known = (await known_laws(tx) if laws is None else set(laws)) | {f.law for f in facts if f.law}
    for f in facts:
        f.refs, dropped = resolve_hints(f.refs, known)
        stats.dropped_hints += dropped
    rows = [_fact_row(f) for f in facts]
    await (await tx.run(_WRITE_FACTS, docs=rows, version=DOCGRAPH_VERSION)).consume()
    stats.terms = sum(len(f.terms) for f in facts)

    keys = sorted(old_keys | {f.key for f in facts if f.key})
    await (await tx.run(_UNMATERIALISE, keys=keys)).consume()
    made = await _records(tx, _MATERIALISE, keys=keys) + await _records(tx, _MATERIALISE_OUT, ids=ids, keys=keys)
    for r in made:
        if r["rel"] == "CITES":
            stats.cites += r["n"]
        elif r["rel"] == "AMENDS":
            stats.amends += r["n"]

    pairs = await _version_pairs(tx, keys)
    if pairs:
        await (await tx.run(_WRITE_VERSIONS, pairs=pairs)).consume()
    stats.versions = len(pairs)

    await _mentions(tx, facts, ids)
    await drop_orphan_keys(tx, touched)
    await (await tx.run(_ORPHAN_TERMS)).consume()
    await (await tx.run(_BUMP, id=META_ID, facts=True)).consume()
    return stats


async def bump_version(tx: AsyncManagedTransaction, facts_changed: bool = True) -> None:
    """After documents were written without facts or deleted: drops terms no
    document defines any more and bumps the graph version (readers refresh
    their view of the collections) and, when ``facts_changed``, the facts
    version too (readers rebuild their packs' lookup tables)."""
    await (await tx.run(_ORPHAN_TERMS)).consume()
    await (await tx.run(_BUMP, id=META_ID, facts=facts_changed)).consume()


async def _version_pairs(tx: AsyncManagedTransaction, keys: list[str]) -> list[dict[str, Any]]:
    by_key: dict[str, list[tuple[Version, str, str]]] = defaultdict(list)
    for r in await _records(tx, _VERSIONS, keys=keys):
        by_key[r["key"]].append((Version(r["id"], r["status"] or "", bool(r["current"])), r["text"] or "",
                                 r["first_chunk"] or ""))
    pairs = []
    for docs in by_key.values():
        first_chunk = {v.id: chunk for v, _, chunk in docs}
        for old, new, similarity in version_pairs([(v, text) for v, text, _ in docs]):
            pairs.append({"old": old, "new": new, "similarity": similarity, "chunk_id": first_chunk[old]})
    return pairs


async def keys_of(tx: AsyncManagedTransaction, ids: list[str]) -> set[str]:
    """The ArticleKey keys documents ``ids`` are at or refer to (read before
    they are deleted, for ``drop_orphan_keys``)."""
    return {r["key"] for r in await _records(tx, _TOUCHED_KEYS, ids=ids)}


async def drop_orphan_keys(tx: AsyncManagedTransaction, keys: set[str] | list[str]) -> None:
    """Deletes the ArticleKey nodes of ``keys`` that no document is at or
    refers to any more (a deleted or rewritten document leaves none behind)."""
    if keys:
        await (await tx.run(_ORPHAN_KEYS, keys=sorted(keys))).consume()


async def _mentions(tx: AsyncManagedTransaction, facts: list[DocFacts], ids: list[str]) -> None:
    groups = sorted({(f.collection, f.law) for f in facts if f.law})
    if not groups:
        return
    terms_by_law: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for r in await _records(tx, _LAW_TERMS, groups=[{"collection": c, "law": law} for c, law in groups]):
        terms_by_law[(r["collection"], r["law"])].append((r["key"], r["name"]))
    pairs = []
    for f in facts:
        defined = {t.name for t in f.terms}
        for key, name in terms_by_law.get((f.collection, f.law), []):
            if name not in defined and name in f.text:
                pairs.append({"doc": f.id, "term": key})
    if pairs:
        await (await tx.run(_WRITE_MENTIONS, pairs=pairs)).consume()
    if any(f.terms for f in facts):
        await (await tx.run(_MENTIONS_OF_NEW_TERMS, ids=ids)).consume()


async def dangling_references(tx: AsyncManagedTransaction) -> int:
    """Stored references that name an article no stored document holds."""
    records = await _records(tx, _DANGLING)
    return int(records[0]["n"]) if records else 0
