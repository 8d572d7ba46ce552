"""Editing the Neo4j knowledge graph of ``kg_store``: export of entities
with their facts, deletion of entities with every edge touching them,
deletion of single facts, and the unlinking an entity's replacement needs.

Every statement is constant Cypher with parameters, except the relation
type of a fact, quoted by ``relation_type`` (as at ingestion). After a
change, ``prune`` removes what no edge holds any more in the collection:
aliases no entity has, values no fact points at, empty categories and
placeholder parents without children. Deleting entities bumps the library
version, so readers (the expander's index) rebuild.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from services.common.entity_skeleton import name_key
from services.common.records import Deletion, EntityExport, EntityRecord

_ENTITY_FIELDS = """
OPTIONAL MATCH (p:Entity)-[:PARENT_OF]->(e)
WITH e, p ORDER BY p.name
WITH e, collect(p.name) AS parents
RETURN e.name AS name, e.category AS category, e.definition AS definition, e.aliases AS aliases,
       e.attributes AS attributes, parents
ORDER BY name
"""
_PAGE = ("MATCH (e:Entity {collection: $collection}) WHERE e.placeholder IS NULL AND e.name > $after "
         "WITH e ORDER BY e.name LIMIT $limit" + _ENTITY_FIELDS)
_NAMED = ("UNWIND $names AS n MATCH (e:Entity {collection: $collection, name: n}) WHERE e.placeholder IS NULL "
          "WITH DISTINCT e" + _ENTITY_FIELDS)
_FACTS_FROM = """
UNWIND $names AS n
MATCH (s:Entity {collection: $collection, name: n})-[r]->(o) WHERE r.predicate IS NOT NULL
RETURN s.name AS subject, r.predicate AS predicate, o.name AS object
"""
_FACTS_TO = """
UNWIND $names AS n
MATCH (s:Entity)-[r]->(o:Entity {collection: $collection, name: n}) WHERE r.predicate IS NOT NULL
RETURN s.name AS subject, r.predicate AS predicate, o.name AS object
"""
_CHILDREN = """
UNWIND $names AS n
MATCH (:Entity {collection: $collection, name: n})-[:PARENT_OF]->(c:Entity) WHERE c.placeholder IS NULL
RETURN DISTINCT c.name AS name
"""
_TOUCHED = """
UNWIND $names AS n
MATCH (e:Entity {collection: $collection, name: n}) WHERE e.placeholder IS NULL
OPTIONAL MATCH (e)-[r]-()
WITH collect(DISTINCT e.name) AS names, collect(DISTINCT r) AS edges
RETURN names, size(edges) AS edges
"""
_SUBJECTS_OF = """
UNWIND $names AS n
MATCH (s:Entity)-[r]->(:Entity {collection: $collection, name: n}) WHERE r.predicate IS NOT NULL
RETURN DISTINCT s.name AS name
"""
_DETACH = "UNWIND $names AS n MATCH (e:Entity {collection: $collection, name: n}) DETACH DELETE e"
# What a replaced entity loses before it is merged again with its new fields.
UNLINK = """
UNWIND $names AS n
MATCH (e:Entity {collection: $collection, name: n})
CALL (e) { MATCH (e)-[h:HAS_ALIAS]->() DELETE h }
CALL (e) { MATCH ()-[p:PARENT_OF]->(e) DELETE p }
CALL (e) { MATCH (:Category)-[c:HAS_ENTITY]->(e) DELETE c }
"""
_DELETE_FACT = """
UNWIND $rows AS t
MATCH (s:Entity {{collection: $collection, name: t.s}})-[r:{rel}]->(o)
WHERE (o:Entity AND o.name = t.o) OR (o:Value AND o.key = t.k)
DELETE r
RETURN count(r) AS n
"""
_REFRESH_DEGREE = """
UNWIND $names AS n
MATCH (e:Entity {collection: $collection, name: n})
SET e.degree = COUNT { (e)-[r]->() WHERE r.predicate IS NOT NULL }
"""
_PRUNE = (
    "MATCH (a:Alias {collection: $collection}) WHERE NOT (a)<-[:HAS_ALIAS]-() DELETE a RETURN count(a) AS n",
    "MATCH (v:Value {collection: $collection}) WHERE NOT ()-->(v) DELETE v RETURN count(v) AS n",
    "MATCH (c:Category {collection: $collection}) WHERE NOT (c)-->() DELETE c RETURN count(c) AS n",
    "MATCH (p:Entity {collection: $collection}) WHERE p.placeholder = true AND NOT (p)--() DELETE p RETURN count(p) AS n",
)
_BUMP_VERSION = "MERGE (l:Library {id: 'default'}) SET l.version = coalesce(l.version, 0) + 1"


def relation_type(predicate: str) -> str:
    """The predicate as a quoted Cypher relation type (as kg_store's)."""
    return "`" + predicate.replace("`", "``") + "`"


def _record(rec: Any) -> EntityRecord:
    attributes = json.loads(rec["attributes"]) if rec["attributes"] else {}
    return EntityRecord(name=rec["name"], category=rec["category"] or "", definition=rec["definition"] or "",
                        aliases=list(rec["aliases"] or []), parents=list(rec["parents"]),
                        attributes={str(k): str(v) for k, v in attributes.items()})


async def export(kg: Any, collection: str, names: list[str], page_size: int, after: str,
                 with_links: bool) -> EntityExport:
    """The named entities (or a page after ``after``), their outgoing facts
    and, with ``with_links``, the facts pointing at them and their children."""
    if names:
        records = await kg._read(_NAMED, names=names, collection=collection)
    else:
        records = await kg._read(_PAGE, after=after, limit=page_size, collection=collection)
    out = EntityExport(entities=[_record(r) for r in records])
    found = [e.name for e in out.entities]
    if not found:
        return out
    facts = {(r["subject"], r["predicate"], r["object"]) for r in await kg._read(_FACTS_FROM, names=found, collection=collection)}
    if with_links:
        facts |= {(r["subject"], r["predicate"], r["object"]) for r in await kg._read(_FACTS_TO, names=found, collection=collection)}
        children = [r["name"] for r in await kg._read(_CHILDREN, names=found, collection=collection)]
        if children:
            out.children = [_record(r) for r in await kg._read(_NAMED, names=children, collection=collection)]
    out.triples = sorted(facts)
    return out


async def prune(kg: Any, collection: str) -> int:
    """Deletes the collection's nodes no edge holds any more (see module
    doc); returns how many went."""
    removed = 0
    for statement in _PRUNE:
        removed += (await kg._write(statement, collection=collection)).records[0]["n"]
    return removed


async def unlink(kg: Any, names: list[str], collection: str) -> None:
    """Removes the alias, parent and category edges of the named entities
    (before they are merged again with their replacement fields)."""
    await kg._write(UNLINK, names=names, collection=collection)


async def delete_entities(kg: Any, names: list[str], collection: str) -> tuple[Deletion, list[str]]:
    """Deletes the named library entities (not placeholders) with every
    edge touching them, then prunes; bumps the library version when one
    went. Returns (counts, names removed)."""
    touched = (await kg._read(_TOUCHED, names=names, collection=collection))[0]
    removed = sorted(touched["names"])
    if not removed:
        return Deletion(), []
    subjects = [r["name"] for r in await kg._read(_SUBJECTS_OF, names=removed, collection=collection)]
    await kg._write(_DETACH, names=removed, collection=collection)
    others = sorted(set(subjects) - set(removed))
    if others:
        await kg._write(_REFRESH_DEGREE, names=others, collection=collection)
    pruned = await prune(kg, collection)
    await kg._write(_BUMP_VERSION)
    return Deletion(entities=len(removed), graph_nodes=len(removed) + pruned, graph_edges=int(touched["edges"])), removed


async def delete_triples(kg: Any, triples: list[tuple[str, str, str]], collection: str) -> int:
    """Deletes the given facts (relation type = predicate; the object an
    entity of that name or a value of that key); returns how many went."""
    by_predicate: dict[str, list[dict]] = defaultdict(list)
    for s, p, o in triples:
        by_predicate[p].append({"s": s, "o": o, "k": name_key(o)})
    deleted = 0
    for predicate, rows in sorted(by_predicate.items()):
        result = await kg._write(_DELETE_FACT.format(rel=relation_type(predicate)), rows=rows, collection=collection)
        deleted += result.records[0]["n"]
    if deleted:
        await kg._write(_REFRESH_DEGREE, names=sorted({s for s, _, _ in triples}), collection=collection)
        await prune(kg, collection)
    return deleted
