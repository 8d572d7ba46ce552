"""Document lifecycle in Neo4j: list, delete and count by collection.

Deleting a document removes, in one transaction, the Document node, its
Chunk nodes and every relationship touching them (HAS_CHUNK, NEXT,
PARENT_OF from its heading, and any edge other graph features hang on a
chunk or document), then each Heading above it that no longer has anything
under it, bottom up. A Heading still holding another document stays.
Cypher is constant; ids, collections and conditions are parameters
(``filter_cypher``).
"""
from __future__ import annotations

import json
from typing import Any

from neo4j import AsyncManagedTransaction

from services.common.filters import Condition
from services.common.records import Deletion, StoredDocumentInfo
from services.retriever_graph import doc_graph
from services.retriever_graph.filter_cypher import scope_cypher

#: Deepest heading nesting looked at (as the retriever's PARENT_OF*1..8).
MAX_HEADING_DEPTH = 8

_ANCESTORS = """
MATCH (h:Heading)-[:PARENT_OF*0..8]->(p:Heading) WHERE p.id IN $ids
RETURN collect(DISTINCT h.id) AS ids
"""

_PRUNE = """
MATCH (h:Heading) WHERE h.id IN $ids AND NOT (h)-[:PARENT_OF]->()
WITH h, COUNT { (h)--() } AS edges
DETACH DELETE h
RETURN count(h) AS nodes, coalesce(sum(edges), 0) AS edges
"""

_DOCUMENT_PARENTS = """
MATCH (p:Heading)-[:PARENT_OF]->(d:Document) WHERE d.id IN $ids
RETURN collect(DISTINCT p.id) AS ids
"""

_COUNT_DOCUMENT_GRAPH = """
MATCH (d:Document) WHERE d.id IN $ids
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk)
WITH collect(DISTINCT d) + collect(DISTINCT c) AS nodes, count(DISTINCT c) AS chunks
UNWIND nodes AS n
OPTIONAL MATCH (n)-[r]-()
RETURN size(nodes) AS nodes, chunks, count(DISTINCT r) AS edges
"""

_DELETE_DOCUMENT_GRAPH = """
MATCH (d:Document) WHERE d.id IN $ids
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk)
DETACH DELETE c, d
"""

_LIST = """
MATCH (d:Document) WHERE WHERE_CLAUSE AND d.id > $after
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk)
WITH d, count(c) AS chunks ORDER BY d.id LIMIT $limit
RETURN d.id AS id, coalesce(d.collection, 'default') AS collection, d.title AS title, coalesce(d.source, '') AS source,
       d.heading_path AS heading_path, d.metadata AS metadata, d.content_hash AS hash, chunks,
       coalesce(d.updated_ms, 0) AS updated_ms
"""

_COUNTS = """
MATCH (d:Document)
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk)
RETURN coalesce(d.collection, 'default') AS collection, count(DISTINCT d) AS documents, count(c) AS chunks
ORDER BY collection
"""


async def prune_headings(tx: AsyncManagedTransaction, heading_ids: list[str]) -> tuple[int, int]:
    """Deletes the Headings of ``heading_ids`` and their ancestors that no
    longer have anything under them, bottom up. Returns (nodes, edges) removed."""
    ids = (await (await tx.run(_ANCESTORS, ids=heading_ids)).single())["ids"]
    nodes = edges = 0
    for _ in range(MAX_HEADING_DEPTH + 1):
        row = await (await tx.run(_PRUNE, ids=ids)).single()
        if not row["nodes"]:
            break
        nodes += row["nodes"]
        edges += row["edges"]
    return nodes, edges


def _where(ids: list[str], collections: list[str] | None, conditions: list[Condition], params: dict[str, Any]) -> str:
    """Documents of ``ids`` (when given) in scope (collections: None = any)."""
    scope = scope_cypher(collections, conditions, params)
    if ids:
        params["ids"] = list(ids)
        return f"d.id IN $ids AND {scope}"
    return scope


async def delete_documents(tx: AsyncManagedTransaction, ids: list[str], collections: list[str] | None,
                           conditions: list[Condition]) -> Deletion:
    """Transaction function: deletes the documents of ``ids`` (or in scope)
    and what only they support; unknown ids are ignored. Edges between two
    deleted nodes count once."""
    params: dict[str, Any] = {}
    where = _where(ids, collections, conditions, params)
    found = [r["id"] async for r in await tx.run(f"MATCH (d:Document) WHERE {where} RETURN d.id AS id ORDER BY id", **params)]
    if not found:
        return Deletion()
    parents = (await (await tx.run(_DOCUMENT_PARENTS, ids=found)).single())["ids"]
    counted = await (await tx.run(_COUNT_DOCUMENT_GRAPH, ids=found)).single()
    keys = await doc_graph.keys_of(tx, found)
    await (await tx.run(_DELETE_DOCUMENT_GRAPH, ids=found)).consume()
    await doc_graph.drop_orphan_keys(tx, keys)
    heading_nodes, heading_edges = await prune_headings(tx, parents) if parents else (0, 0)
    return Deletion(
        documents=len(found), chunks=int(counted["chunks"]),
        graph_nodes=int(counted["nodes"]) + heading_nodes,
        # a heading's edges other than to a deleted document were not counted yet
        graph_edges=int(counted["edges"]) + heading_edges,
        document_ids=found,
    )


async def list_documents(store: Any, ids: list[str], collections: list[str] | None, conditions: list[Condition],
                         page_size: int, after_id: str) -> list[StoredDocumentInfo]:
    """Stored documents ordered by id (as the PostgreSQL listing); ``store``
    is the GraphStore whose ``_query`` runs the read."""
    params: dict[str, Any] = {"after": after_id, "limit": page_size}
    where = _where(ids, collections, conditions, params)
    rows = await store._query(_LIST.replace("WHERE_CLAUSE", where), params)
    return [
        StoredDocumentInfo(
            id=r["id"], collection=r["collection"], title=r["title"] or "", source=r["source"],
            heading_path=list(r["heading_path"] or []), metadata=json.loads(r["metadata"] or "{}"),
            content_hash=r["hash"] or "", chunk_count=int(r["chunks"]), update_time_ms=int(r["updated_ms"]),
        )
        for r in rows
    ]


async def collection_counts(store: Any) -> dict[str, tuple[int, int]]:
    """{collection: (documents, chunks)} of the GraphStore ``store``."""
    return {r["collection"]: (int(r["documents"]), int(r["chunks"])) for r in await store._query(_COUNTS)}
