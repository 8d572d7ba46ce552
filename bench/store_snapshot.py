"""A collection's stored state in both stores, in a form two collections can
be compared by (used by bench/crash_workloads.py): the state a crashed and
retried write left must equal the state the same write left when nothing
failed, and a deleted collection must leave nothing behind.

``snapshot(dsn, neo4j_uri, collection)`` reads, with parameters only:

- PostgreSQL: the collection's entity cards (name, category, content hash,
  gram count), surfaces (entity, ordinal, surface, whether it has a vector),
  the n-gram postings per entity (count, sum of tf), and its documents,
  chunks and keyword postings (counts and content hashes);
- Neo4j: every node whose ``collection`` is the collection (labels and its
  key: id, name or key), every relationship from such a node to one of the
  collection or to a node without a collection property (type, both ends'
  keys, ``predicate``), those end nodes, and how many relationships cross
  into another collection.

``leftovers(dsn, neo4j_uri, collection)`` counts what still names a
collection in either store (rows of every GraphMesh table with a
``collection`` column, chunks without their document, Neo4j nodes with
that property).
"""
from __future__ import annotations

from dataclasses import dataclass, field

PG_TABLES_WITH_COLLECTION = ("documents", "chunk_terms", "entity_cards", "entity_surfaces", "entity_grams",
                             "collections")


@dataclass
class Snapshot:
    """What one collection holds; equal snapshots = the same stored state."""

    pg: dict[str, object] = field(default_factory=dict)
    neo4j: dict[str, object] = field(default_factory=dict)

    def differences(self, other: "Snapshot") -> list[str]:
        """What differs from ``other``, as text ([] = the same state)."""
        out = []
        for store, mine, theirs in (("pg", self.pg, other.pg), ("neo4j", self.neo4j, other.neo4j)):
            for key in sorted(set(mine) | set(theirs)):
                a, b = mine.get(key), theirs.get(key)
                if a == b:
                    continue
                if isinstance(a, (set, frozenset)) and isinstance(b, (set, frozenset)):
                    out.append(f"{store} {key}: {len(a - b)} only here (e.g. {sorted(map(str, a - b))[:3]}), "
                               f"{len(b - a)} only in the reference (e.g. {sorted(map(str, b - a))[:3]})")
                else:
                    out.append(f"{store} {key}: {a!r} here, {b!r} in the reference")
        return out


async def snapshot(dsn: str, neo4j_uri: str, collection: str, auth: tuple[str, str] | None = None) -> Snapshot:
    """The stored state of ``collection`` (see the module docstring);
    ``auth`` (user, password) for a Neo4j with authentication on."""
    import asyncpg
    from neo4j import AsyncGraphDatabase

    snap = Snapshot()
    conn = await asyncpg.connect(dsn)
    try:
        snap.pg["entity_cards"] = {tuple(r) for r in await conn.fetch(
            "SELECT name, category, content_hash, gram_count FROM entity_cards WHERE collection = $1", collection)}
        snap.pg["entity_surfaces"] = {tuple(r) for r in await conn.fetch(
            "SELECT entity_name, ordinal, surface, embedding IS NOT NULL FROM entity_surfaces WHERE collection = $1",
            collection)}
        snap.pg["entity_grams"] = {tuple(r) for r in await conn.fetch(
            "SELECT entity_name, count(*), sum(tf) FROM entity_grams WHERE collection = $1 GROUP BY entity_name",
            collection)}
        snap.pg["documents"] = {tuple(r) for r in await conn.fetch(
            "SELECT id, content_hash FROM documents WHERE collection = $1", collection)}
        snap.pg["chunks"] = {tuple(r) for r in await conn.fetch(
            "SELECT c.id, c.embedding IS NOT NULL FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.collection = $1", collection)}
        snap.pg["chunk_terms"] = await conn.fetchval(
            "SELECT count(*) FROM chunk_terms WHERE collection = $1", collection)
    finally:
        await conn.close()
    driver = AsyncGraphDatabase.driver(neo4j_uri, auth=auth)
    try:
        nodes, _, _ = await driver.execute_query(
            "MATCH (n) WHERE n.collection = $c "
            "RETURN labels(n) AS labels, coalesce(n.id, n.name, n.key) AS key", c=collection)
        edges, _, _ = await driver.execute_query(
            "MATCH (a)-[r]->(b) WHERE a.collection = $c "
            "RETURN type(r) AS type, coalesce(a.id, a.name, a.key) AS a, coalesce(b.id, b.name, b.key) AS b, "
            "r.predicate AS predicate, b.collection = $c AS inside, b.collection IS NULL AS unscoped, "
            "labels(b) AS b_labels", c=collection)
    finally:
        await driver.close()
    node_keys = [(tuple(sorted(r["labels"])), r["key"]) for r in nodes]
    snap.neo4j["nodes"] = set(node_keys)
    snap.neo4j["duplicated_nodes"] = len(node_keys) - len(set(node_keys))
    # Nodes without a collection property (the document graph's Heading,
    # Term and ArticleKey nodes, whose keys hold the collection) count as the
    # collection's when its nodes link to them.
    edge_keys = [(r["type"], r["a"], r["b"], r["predicate"]) for r in edges if r["inside"] or r["unscoped"]]
    snap.neo4j["relationships"] = set(edge_keys)
    snap.neo4j["linked_nodes"] = {(tuple(sorted(r["b_labels"])), r["b"]) for r in edges if r["unscoped"]}
    snap.neo4j["duplicated_relationships"] = len(edge_keys) - len(set(edge_keys))
    snap.neo4j["crossing_relationships"] = sum(1 for r in edges if not r["inside"] and not r["unscoped"])
    return snap


async def leftovers(dsn: str, neo4j_uri: str, collection: str, auth: tuple[str, str] | None = None) -> dict[str, int]:
    """Rows and nodes that still name ``collection``, by table or label (only non-zero ones)."""
    import asyncpg
    from neo4j import AsyncGraphDatabase

    out: dict[str, int] = {}
    conn = await asyncpg.connect(dsn)
    try:
        for table in PG_TABLES_WITH_COLLECTION:
            column = "name" if table == "collections" else "collection"
            if await conn.fetchval("SELECT count(*) FROM information_schema.columns WHERE table_name = $1 "
                                   "AND column_name = $2", table, column):
                n = await conn.fetchval(f"SELECT count(*) FROM {table} WHERE {column} = $1", collection)  # table names are ours
                if n:
                    out[f"pg:{table}"] = n
        out.update({"pg:chunks": n for n in [await conn.fetchval(
            "SELECT count(*) FROM chunks c LEFT JOIN documents d ON d.id = c.document_id WHERE d.id IS NULL")] if n})
    finally:
        await conn.close()
    driver = AsyncGraphDatabase.driver(neo4j_uri, auth=auth)
    try:
        records, _, _ = await driver.execute_query(
            "MATCH (n) WHERE n.collection = $c UNWIND labels(n) AS label RETURN label, count(*) AS n", c=collection)
    finally:
        await driver.close()
    out.update({f"neo4j:{r['label']}": r["n"] for r in records})
    return out
