"""Neo4j knowledge graph of the authorised entity library: ingestion, lookup,
attribute-driven retrieval and weighted expansion.

Graph model::

    (:Library {id: "default", version})                   bumped when entities change
    (:Category {name})-[:HAS_ENTITY]->(:Entity {name, key, category, definition,
        aliases, attributes, object, property, conditions, value_type, degree})
    (:Entity)-[:HAS_ALIAS]->(:Alias {key, name})           given + controlled aliases
    (:Entity)-[:PARENT_OF]->(:Entity)                       from "parents"
    (:Entity)-[:SAME_OBJECT]->(:Entity)                     same skeleton object
    (:Entity)-[:SAME_PROPERTY]->(:Entity)                   same property, same category
    (:Entity)-[:`<predicate>` {predicate}]->(:Entity|:Value {key, name})
                                                            one relation type per predicate

Relation types come from the triples' predicates: each predicate is quoted
as a Cypher identifier (``relation_type``: backticks, embedded backticks
doubled) and also stored as the ``predicate`` property; every other value
is a parameter. Query text never reaches a statement.

Full-text: index ``kg_entity_names`` over Entity.name and Alias.name with the
``cjk`` analyzer (Lucene CJKAnalyzer). Chosen deliberately: Chinese names are
indexed as overlapping character bigrams, so a query sharing any bigram with
a name ("马铃" in "马铃薯") finds it without word segmentation at index or
query time, and Latin parts ("Beck") are still tokenised as words. The
``standard`` analyzer would index each Chinese character alone (no phrase
sense), and a jieba-segmented field would miss names cut differently from the
query.

Weights (the Guizhou indicator GraphRAG design (docs/references.md) section 6, add_candidate): parent/child 0.85, same
object 0.55, same property 0.45, same category 0.35.

Collections: Entity, Alias, Category and Value nodes carry ``collection``
and are unique per (collection, name or key); edges never cross
collections; every read takes the collections it searches. ``migrate``
puts nodes stored before collections into "default" and replaces the old
single-property uniqueness constraints by the (collection, ...) ones. The
library (GetEntityLibrary) lists the entities of every collection.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from neo4j import AsyncDriver, AsyncGraphDatabase, NotificationDisabledClassification, RoutingControl

from services.common import entity_skeleton
from services.common.entity_skeleton import name_key
from services.common.records import EntityHit, EntityRecord
from services.common.store_deadline import QueryBudget
from services.retriever_graph.store import LUCENE_SPECIAL
from services.retriever_graph.timeouts import bound, timed, translate_timeouts

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CategorySummary:
    """A category (community) at a glance.

    Attributes:
        category: its name.
        members: number of member entities.
        top_members: most connected members, best first.
        shared_facts: (predicate, object, members having it), most shared first.
    """

    category: str
    members: int
    top_members: list[str]
    shared_facts: list[tuple[str, str, int]]

ENTITY_INDEX = "kg_entity_names"
FULLTEXT_ANALYZER = "cjk"
DEFAULT_WEIGHTS = {"parent": 0.85, "same_object": 0.55, "same_property": 0.45, "same_category": 0.35}
# Largest group linked by SAME_OBJECT / SAME_PROPERTY edges (all pairs inside a
# group); bigger groups are generic parts ("片", "注射液") and get no edges.
MAX_SKELETON_GROUP = 40
# Relation type names: Neo4j allows any string through dynamic types; we only
# reject the empty one and cap the length.
MAX_PREDICATE_CHARS = 64

# Single-property uniqueness of the library before collections; dropped by migrate().
_OLD_CONSTRAINTS = ("kg_entity_name", "kg_alias_key", "kg_category_name", "kg_value_key")
_KG_LABELS = ("Entity", "Alias", "Category", "Value")
_CONSTRAINTS = (
    "CREATE CONSTRAINT kg_entity_collection_name IF NOT EXISTS FOR (e:Entity) REQUIRE (e.collection, e.name) IS UNIQUE",
    "CREATE CONSTRAINT kg_alias_collection_key IF NOT EXISTS FOR (a:Alias) REQUIRE (a.collection, a.key) IS UNIQUE",
    "CREATE CONSTRAINT kg_category_collection_name IF NOT EXISTS FOR (c:Category) REQUIRE (c.collection, c.name) IS UNIQUE",
    "CREATE CONSTRAINT kg_value_collection_key IF NOT EXISTS FOR (v:Value) REQUIRE (v.collection, v.key) IS UNIQUE",
    "CREATE CONSTRAINT kg_library_id IF NOT EXISTS FOR (l:Library) REQUIRE l.id IS UNIQUE",
    "CREATE INDEX kg_entity_name_only IF NOT EXISTS FOR (e:Entity) ON (e.name)",
    "CREATE INDEX kg_alias_key_only IF NOT EXISTS FOR (a:Alias) ON (a.key)",
    "CREATE INDEX kg_category_name_only IF NOT EXISTS FOR (c:Category) ON (c.name)",
    "CREATE INDEX kg_value_key_only IF NOT EXISTS FOR (v:Value) ON (v.key)",
    "CREATE INDEX kg_entity_key IF NOT EXISTS FOR (e:Entity) ON (e.key)",
    "CREATE INDEX kg_entity_object IF NOT EXISTS FOR (e:Entity) ON (e.object)",
    "CREATE INDEX kg_entity_property IF NOT EXISTS FOR (e:Entity) ON (e.property)",
)
_FULLTEXT = (
    f"CREATE FULLTEXT INDEX {ENTITY_INDEX} IF NOT EXISTS FOR (n:Entity|Alias) ON EACH [n.name] "
    f"OPTIONS {{indexConfig: {{`fulltext.analyzer`: '{FULLTEXT_ANALYZER}'}}}}"
)



#: Relation types the graph itself uses; a fact may not take their name, or
#: it would pose as structure (a PARENT_OF fact would become a parent link).
RESERVED_RELATIONS = frozenset({"HAS_ALIAS", "HAS_ENTITY", "PARENT_OF", "SAME_OBJECT", "SAME_PROPERTY", "HAS_CHUNK", "NEXT"})

#: Characters of a query given to the full-text index. The cjk analyzer
#: makes about one clause per character, and Lucene refuses more than 1024
#: clauses (a 2000-character query failed); names are far shorter anyway.
MAX_FULLTEXT_CHARS = 256


def _entity_hash(row: "EntityRecord") -> str:
    """SHA-256 of everything ingested for an entity."""
    payload = [row.name, row.category, row.definition, list(row.aliases), list(row.parents), sorted(row.attributes.items())]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


def lucene_terms(text: str) -> str:
    """The first MAX_FULLTEXT_CHARS characters of ``text`` as a Lucene query
    of their (escaped) terms, OR-ed: every term the analyzer makes of them
    counts, none is syntax. "" when nothing is left."""
    cleaned = LUCENE_SPECIAL.sub(" ", text[:MAX_FULLTEXT_CHARS])
    cleaned = re.sub(r"\b(AND|OR|NOT|TO)\b", " ", cleaned)
    return " ".join(cleaned.split())


def _hit(rec: Any, channel: str, score: float, matched: str, relation: str) -> EntityHit:
    return EntityHit(
        name=rec["name"], category=rec["category"] or "", definition=rec["definition"] or "",
        aliases=list(rec["aliases"] or [])[:20], degree=int(rec["degree"] or 0),
        channel=channel, score=float(score), matched=matched, relation=relation,
    )


_FIELDS = "e.name AS name, e.category AS category, e.definition AS definition, e.aliases AS aliases, e.degree AS degree"

_MERGE_ENTITIES = """
UNWIND $rows AS r
MERGE (e:Entity {collection: $collection, name: r.name})
SET e.key = r.key, e.category = r.category, e.definition = r.definition, e.aliases = r.aliases,
    e.attributes = r.attributes, e.object = r.object, e.property = r.property, e.content_hash = r.content_hash,
    e.conditions = r.conditions, e.value_type = r.value_type, e.degree = coalesce(e.degree, 0)
WITH e, r
CALL (e, r) {
  WITH e, r WHERE r.category <> ''
  MERGE (c:Category {collection: $collection, name: r.category})
  MERGE (c)-[:HAS_ENTITY]->(e)
}
CALL (e, r) {
  UNWIND r.alias_rows AS a
  MERGE (x:Alias {collection: $collection, key: a.key}) ON CREATE SET x.name = a.name
  MERGE (e)-[h:HAS_ALIAS]->(x) SET h.controlled = a.controlled
}
"""

_ENTITY_HASHES = """
UNWIND $names AS n
MATCH (e:Entity {collection: $collection, name: n})
RETURN e.name AS name, e.content_hash AS content_hash
"""

_MERGE_PARENTS = """
UNWIND $rows AS r
MATCH (c:Entity {collection: $collection, name: r.child})
MERGE (p:Entity {collection: $collection, name: r.parent})
  ON CREATE SET p.key = r.parent_key, p.category = '', p.definition = '', p.aliases = [], p.degree = 0,
                p.placeholder = true
MERGE (p)-[:PARENT_OF]->(c)
"""

_KNOWN_ENTITIES = "UNWIND $names AS n MATCH (e:Entity {collection: $collection, name: n}) RETURN e.name AS name"

# {rel} is a quoted identifier from ``relation_type`` (backticks doubled),
# never raw text: Neo4j 5.26 caches the plan of a dynamic ``$(...)`` type
# across calls, so the type is quoted into one statement per predicate.
_MERGE_TRIPLES_TO_ENTITY = """
UNWIND $rows AS t
MATCH (s:Entity {{collection: $collection, name: t.s}})
MATCH (o:Entity {{collection: $collection, name: t.o}})
MERGE (s)-[r:{rel}]->(o) ON CREATE SET r.predicate = $predicate
"""

_MERGE_TRIPLES_TO_VALUE = """
UNWIND $rows AS t
MATCH (s:Entity {{collection: $collection, name: t.s}})
MERGE (o:Value {{collection: $collection, key: t.k}}) ON CREATE SET o.name = t.o
MERGE (s)-[r:{rel}]->(o) ON CREATE SET r.predicate = $predicate
"""


def relation_type(predicate: str) -> str:
    """Cypher relationship type for ``predicate``: a backtick-quoted
    identifier with embedded backticks doubled (the Cypher escape), so any
    predicate text is a name, never syntax. Callers cap its length."""
    return "`" + predicate.replace("`", "``") + "`"

_REFRESH_DEGREE = """
UNWIND $names AS n
MATCH (e:Entity {collection: $collection, name: n})
SET e.degree = COUNT { (e)-[r]->() WHERE r.predicate IS NOT NULL }
"""

_BUMP_VERSION = "MERGE (l:Library {id: 'default'}) SET l.version = coalesce(l.version, 0) + 1 RETURN l.version AS v"

_GROUP_MEMBERS = {
    "object": (
        "UNWIND $keys AS k MATCH (e:Entity {object: k}) WHERE e.collection = $collection "
        "WITH k, collect(e.name) AS names RETURN k AS key, names"
    ),
    "property": (
        "UNWIND $keys AS k MATCH (e:Entity {property: k}) WHERE e.collection = $collection "
        "WITH k, e.category AS cat, collect(e.name) AS names "
        "WHERE cat <> '' RETURN k AS key, names"
    ),
}
_MERGE_SAME = {
    "object": ("UNWIND $pairs AS p MATCH (a:Entity {collection: $collection, name: p[0]}), "
               "(b:Entity {collection: $collection, name: p[1]}) MERGE (a)-[:SAME_OBJECT]->(b)"),
    "property": ("UNWIND $pairs AS p MATCH (a:Entity {collection: $collection, name: p[0]}), "
                 "(b:Entity {collection: $collection, name: p[1]}) MERGE (a)-[:SAME_PROPERTY]->(b)"),
}

_LOOKUP_EXACT = f"""
UNWIND $keys AS k
MATCH (e:Entity {{key: k}}) WHERE e.placeholder IS NULL AND e.collection IN $collections
RETURN k AS matched, {_FIELDS}
"""

_LOOKUP_ALIAS = f"""
UNWIND $keys AS k
MATCH (a:Alias {{key: k}})<-[:HAS_ALIAS]-(e:Entity) WHERE e.collection IN $collections
RETURN a.name AS matched, {_FIELDS}
"""

_FULLTEXT_SEARCH = f"""
CALL db.index.fulltext.queryNodes($index, $q) YIELD node, score
WHERE node.collection IN $collections
WITH node, score
OPTIONAL MATCH (node)<-[:HAS_ALIAS]-(owner:Entity)
WITH coalesce(owner, node) AS e, node.name AS matched, score
WHERE e:Entity AND e.placeholder IS NULL
WITH e, matched, score LIMIT $limit
RETURN matched, score, {_FIELDS}
"""

# Entities pointing at the named attribute values (a Value or an Entity),
# scored in Cypher so only the best ``$limit`` rows travel: per value the
# best link weight (1.0 when the relation type contains the label or the
# label contains it, or no label is given; ``$other`` otherwise), summed over
# values. type(r) is read from the relationship record itself, no property
# lookup, so values with tens of thousands of links stay cheap.
_ATTRIBUTE = f"""
UNWIND $values AS v
CALL (v) {{
  UNWIND v.keys AS k
  MATCH (x:Value {{key: k}}) WHERE x.collection IN $collections RETURN x
  UNION
  UNWIND v.keys AS k
  MATCH (x:Entity {{key: k}}) WHERE x.collection IN $collections RETURN x
}}
MATCH (e:Entity)-[r]->(x)
WHERE NOT type(r) IN ['PARENT_OF', 'SAME_OBJECT', 'SAME_PROPERTY', 'HAS_ALIAS']
WITH e, v.value AS value,
     max(CASE WHEN $label = '' OR type(r) CONTAINS $label OR $label CONTAINS type(r) THEN 1.0 ELSE $other END) AS w
WITH e, sum(w) AS covered, collect(value) AS matched
ORDER BY covered DESC, e.degree ASC, e.name ASC
LIMIT $limit
RETURN covered, matched, {_FIELDS}
"""

_EXPAND = f"""
UNWIND $seeds AS seed
MATCH (s:Entity {{name: seed.name}}) WHERE s.collection IN $collections
CALL (s) {{
  MATCH (s)-[:PARENT_OF]-(e:Entity) WHERE e.placeholder IS NULL RETURN e, 'parent' AS relation LIMIT 20
  UNION
  MATCH (s)-[:SAME_OBJECT]-(e:Entity) RETURN e, 'same_object' AS relation LIMIT 20
  UNION
  MATCH (s)-[:SAME_PROPERTY]-(e:Entity) RETURN e, 'same_property' AS relation LIMIT 20
  UNION
  MATCH (c:Category)-[:HAS_ENTITY]->(s) WITH c, s
  MATCH (c)-[:HAS_ENTITY]->(e:Entity) WHERE e <> s RETURN e, 'same_category' AS relation LIMIT 10
}}
RETURN seed.name AS seed, seed.score AS seed_score, relation, {_FIELDS}
"""

_CATEGORY_MEMBERS = f"""
UNWIND $categories AS cat
MATCH (c:Category {{name: cat}})-[:HAS_ENTITY]->(e:Entity) WHERE c.collection IN $collections
RETURN cat AS matched, {_FIELDS}
ORDER BY e.degree DESC
LIMIT $limit
"""

_CATEGORY_SUMMARY = """
UNWIND $categories AS cat
MATCH (c:Category {name: cat})-[:HAS_ENTITY]->(e:Entity) WHERE c.collection IN $collections
WITH cat, e ORDER BY e.degree DESC, e.name
WITH cat, count(e) AS members, collect(e.name)[..$top_members] AS top
RETURN cat AS category, members, top
"""

# The facts members share most: (predicate, object) pairs by how many
# members of the category have them (the community view of a category).
_CATEGORY_FACTS = """
UNWIND $categories AS cat
MATCH (c:Category {name: cat})-[:HAS_ENTITY]->(e:Entity)-[r]->(o)
WHERE r.predicate IS NOT NULL AND c.collection IN $collections
WITH cat, r.predicate AS predicate, o.name AS value, count(DISTINCT e) AS members
WHERE members >= 2
WITH cat, predicate, value, members ORDER BY members DESC, predicate, value
WITH cat, collect({predicate: predicate, value: value, members: members})[..$top_facts] AS facts
RETURN cat AS category, facts
"""

_LIBRARY_INDEX = """
MATCH (e:Entity) WHERE e.placeholder IS NULL
OPTIONAL MATCH (e)-[:HAS_ALIAS]->(a:Alias)
RETURN e.name AS name, e.category AS category, collect(a.name) AS aliases
"""


def value_keys(value: str) -> list[str]:
    """Keys an attribute value is matched by: its name key and, when it ends
    with an open-list marker ("等", "等等"), the key without it."""
    key = name_key(value)
    keys = [key]
    for suffix in ("等等", "等"):
        if key.endswith(suffix) and len(key) > len(suffix):
            keys.append(key[: -len(suffix)])
            break
    return keys


class KnowledgeGraphStore:
    """Entity library and knowledge graph in Neo4j (see module doc).

    ``driver`` may be shared with the document GraphStore; ``database`` is the
    Neo4j database name. All Cypher is constant; data travels as parameters.
    ``budget`` (services.common.store_deadline.QueryBudget) sets each read's
    and write's transaction timeout (None: no timeout).
    """

    def __init__(self, driver: AsyncDriver, database: str = "neo4j", weights: dict[str, float] | None = None,
                 budget: QueryBudget | None = None) -> None:
        self.driver = driver
        self.database = database
        #: Transaction timeouts of reads and writes (None: none).
        self.budget = budget
        self.weights = {**DEFAULT_WEIGHTS, **(weights or {})}

    @classmethod
    def connect(cls, uri: str, user: str | None = None, password: str | None = None, database: str = "neo4j") -> "KnowledgeGraphStore":
        """A store with its own driver (tests, benchmarks)."""
        auth = (user, password) if user else None
        driver = AsyncGraphDatabase.driver(
            uri, auth=auth, notifications_disabled_classifications=[NotificationDisabledClassification.DEPRECATION]
        )
        return cls(driver, database)

    async def migrate(self) -> None:
        """Creates constraints, indexes and the full-text index (idempotent);
        puts library nodes stored before collections into "default" and
        drops the old single-property uniqueness constraints."""
        for name in _OLD_CONSTRAINTS:
            await self.driver.execute_query(f"DROP CONSTRAINT {name} IF EXISTS", database_=self.database)
        for label in _KG_LABELS:  # constant labels
            while (await self.driver.execute_query(
                    f"MATCH (n:{label}) WHERE n.collection IS NULL WITH n LIMIT 20000 SET n.collection = 'default' "
                    "RETURN count(n) AS n", database_=self.database)).records[0]["n"]:
                pass
        for statement in (*_CONSTRAINTS, _FULLTEXT):
            await self.driver.execute_query(statement, database_=self.database)
        await self.driver.execute_query("CALL db.awaitIndexes(300)", database_=self.database)

    async def _write(self, query: str, **params: Any) -> Any:
        """Runs a write, bounded by the RPC's remaining deadline
        (``self.budget``). Raises StoreTimeout when Neo4j terminated it."""
        seconds = bound(self.budget, write=True)
        with translate_timeouts(seconds):
            return await self.driver.execute_query(timed(query, seconds), params, database_=self.database)

    async def _read(self, query: str, **params: Any) -> list[Any]:
        """Records of a read, bounded by the RPC's remaining deadline at most
        the read ceiling. Raises StoreTimeout when Neo4j terminated it."""
        seconds = bound(self.budget)
        with translate_timeouts(seconds):
            result = await self.driver.execute_query(timed(query, seconds), params, database_=self.database,
                                                     routing_=RoutingControl.READ)
        return result.records

    # ---- ingestion -------------------------------------------------------
    async def ingest_entities(self, rows: list[EntityRecord], batch_size: int = 2000,
                              collection: str = "default", force: bool = False) -> tuple[int, int]:
        """Merges entities by name with their category, given and controlled
        aliases and parents; then links skeleton groups (SAME_OBJECT,
        SAME_PROPERTY) touched by these entities, all in ``collection``. An
        entity stored there with the same content (content hash of all its
        fields) is left alone, unless ``force``.

        Returns:
            (written, unchanged) entity counts.
        """
        objects: set[str] = set()
        properties: set[str] = set()
        unchanged = 0
        for start in range(0, len(rows), batch_size):
            batch = rows[start : start + batch_size]
            hashes = {r.name: _entity_hash(r) for r in batch}
            stored = {rec["name"]: rec["content_hash"] for rec in await self._read(_ENTITY_HASHES, names=list(hashes), collection=collection)}
            todo = batch if force else [r for r in batch if stored.get(r.name) != hashes[r.name]]
            unchanged += len(batch) - len(todo)
            # Parents and groups are merged for unchanged entities too (MERGE:
            # idempotent): a write cancelled or killed after storing the
            # entities (their content hash) but before their parents or groups
            # is repaired by the retry, which finds every entity unchanged.
            parents = []
            for r in batch:
                sk = entity_skeleton.parse(r.name)
                objects.add(name_key(sk.object))
                if sk.property:
                    properties.add(name_key(sk.property))
                parents += [{"child": r.name, "parent": p, "parent_key": name_key(p)} for p in r.parents if p.strip() and p != r.name]
            if not todo:
                if parents:
                    await self._write(_MERGE_PARENTS, rows=parents, collection=collection)
                continue
            payload = []
            for r in todo:
                sk = entity_skeleton.parse(r.name)
                given = [a for a in r.aliases if a.strip() and name_key(a) != name_key(r.name)]
                alias_rows = [{"key": name_key(a), "name": a, "controlled": False} for a in given]
                alias_rows += [
                    {"key": name_key(a), "name": a, "controlled": True} for a in entity_skeleton.controlled_aliases(r.name)
                ]
                dedup = {a["key"]: a for a in reversed(alias_rows)}
                payload.append({
                    "name": r.name, "key": name_key(r.name), "category": r.category, "definition": r.definition,
                    "aliases": given, "attributes": json.dumps(r.attributes, ensure_ascii=False),
                    "object": name_key(sk.object), "property": name_key(sk.property),
                    "conditions": list(sk.conditions), "value_type": sk.value_type,
                    "alias_rows": list(dedup.values()), "content_hash": hashes[r.name],
                })
            await self._write(_MERGE_ENTITIES, rows=payload, collection=collection)
            if parents:
                await self._write(_MERGE_PARENTS, rows=parents, collection=collection)
        await self._link_groups("object", sorted(objects), collection)
        await self._link_groups("property", sorted(properties), collection)
        if unchanged < len(rows):
            await self._write(_BUMP_VERSION)
        return len(rows) - unchanged, unchanged

    async def _link_groups(self, kind: str, keys: list[str], collection: str, batch_size: int = 2000) -> None:
        for start in range(0, len(keys), batch_size):
            records = await self._read(_GROUP_MEMBERS[kind], keys=keys[start : start + batch_size], collection=collection)
            pairs = []
            for rec in records:
                names = sorted(rec["names"])
                if 2 <= len(names) <= MAX_SKELETON_GROUP:
                    pairs += [[a, b] for i, a in enumerate(names) for b in names[i + 1 :]]
            for p in range(0, len(pairs), 10_000):
                await self._write(_MERGE_SAME[kind], pairs=pairs[p : p + 10_000], collection=collection)

    async def ingest_triples(self, triples: list[tuple[str, str, str]], batch_size: int = 5000,
                             collection: str = "default") -> tuple[int, list[tuple[int, str]]]:
        """Merges (subject, predicate, object) triples: the relation type is
        the predicate; an object that names a library entity links to it,
        any other becomes a Value node. Returns (stored, [(index, reason)])
        for triples with a blank field, an over-long or reserved predicate
        (RESERVED_RELATIONS) or a subject outside the library of ``collection``."""
        failures: list[tuple[int, str]] = []
        clean: list[tuple[int, str, str, str]] = []
        for i, (s, p, o) in enumerate(triples):
            s, p, o = s.strip(), p.strip(), o.strip()
            if not s or not p or not o:
                failures.append((i, "subject, predicate and object must not be blank"))
            elif len(p) > MAX_PREDICATE_CHARS:
                failures.append((i, f"predicate longer than {MAX_PREDICATE_CHARS} characters"))
            elif p.upper() in RESERVED_RELATIONS:
                failures.append((i, f"predicate {p!r} is reserved for the graph's own structure"))
            else:
                clean.append((i, s, p, o))
        names = sorted({s for _, s, _, _ in clean} | {o for _, _, _, o in clean})
        known: set[str] = set()
        for start in range(0, len(names), 20_000):
            known.update(r["name"] for r in await self._read(_KNOWN_ENTITIES, names=names[start : start + 20_000], collection=collection))
        stored = 0
        to_entity, to_value = [], []
        for i, s, p, o in clean:
            if s not in known:
                failures.append((i, f"subject {s!r} is not a library entity"))
                continue
            if o in known:
                to_entity.append({"s": s, "p": p, "o": o})
            else:
                to_value.append({"s": s, "p": p, "o": o, "k": name_key(o)})
        for rows, query in ((to_entity, _MERGE_TRIPLES_TO_ENTITY), (to_value, _MERGE_TRIPLES_TO_VALUE)):
            # One statement per predicate: a dynamic type is evaluated once per
            # statement, so the predicate is a top-level parameter. Sorting by
            # subject keeps each batch's locks on few nodes.
            by_predicate: dict[str, list[dict]] = defaultdict(list)
            for t in rows:
                by_predicate[t["p"]].append(t)
            for predicate, group in sorted(by_predicate.items()):
                group.sort(key=lambda t: t["s"])
                for start in range(0, len(group), batch_size):
                    await self._write(query.format(rel=relation_type(predicate)), rows=group[start : start + batch_size], predicate=predicate,
                                      collection=collection)
                    stored += len(group[start : start + batch_size])
        subjects = sorted({t["s"] for t in to_entity} | {t["s"] for t in to_value})
        for start in range(0, len(subjects), 5000):
            await self._write(_REFRESH_DEGREE, names=subjects[start : start + 5000], collection=collection)
        # Facts do not change names, aliases or categories: the library
        # version (which readers such as the expander's index follow) stays.
        return stored, sorted(failures)

    async def entity_counts(self) -> dict[str, int]:
        """{collection: library entities (placeholders not counted)}."""
        return {r["collection"]: int(r["n"]) for r in await self._read(
            "MATCH (e:Entity) WHERE e.placeholder IS NULL RETURN e.collection AS collection, count(e) AS n ORDER BY collection")}

    async def delete_collection(self, collection: str) -> tuple[int, int, int]:
        """Deletes every Entity, Alias, Category and Value of ``collection``
        with their edges (facts included), in batches; bumps the library
        version when entities went. Returns (nodes, edges, entities) removed."""
        entities = (await self.entity_counts()).get(collection, 0)
        edges = (await self._read(
            "MATCH (n)-[r]-() WHERE (n:Entity OR n:Alias OR n:Category OR n:Value) AND n.collection = $collection "
            "RETURN count(DISTINCT r) AS n", collection=collection))[0]["n"]
        nodes = 0
        for label in _KG_LABELS:  # constant labels
            while True:
                result = await self._write(
                    f"MATCH (n:{label}) WHERE n.collection = $collection WITH n LIMIT 5000 DETACH DELETE n RETURN count(n) AS n",
                    collection=collection)
                if not result.records[0]["n"]:
                    break
                nodes += result.records[0]["n"]
        if nodes:
            await self._write(_BUMP_VERSION)
        return nodes, int(edges), entities

    # ---- reading -----------------------------------------------------------
    async def library_version(self) -> int:
        """Version of the library, bumped whenever entities are written (0
        when empty)."""
        records = await self._read("MATCH (l:Library {id: 'default'}) RETURN l.version AS v")
        return int(records[0]["v"]) if records else 0

    async def library_index(self) -> list[tuple[str, str, list[str]]]:
        """(name, category, aliases) of every library entity."""
        return [(r["name"], r["category"] or "", list(r["aliases"])) for r in await self._read(_LIBRARY_INDEX)]

    async def lookup(self, names: Iterable[str], collections: Iterable[str] = ("default",)) -> list[EntityHit]:
        """Entities whose name or alias equals one of ``names`` (by name key):
        channel graph.exact (score 1.0) or graph.alias (0.95)."""
        keys = sorted({name_key(n) for n in names if name_key(n)})
        if not keys:
            return []
        scope = list(collections)
        hits = [_hit(r, "graph.exact", 1.0, r["matched"], "direct")
                for r in await self._read(_LOOKUP_EXACT, keys=keys, collections=scope)]
        hits += [_hit(r, "graph.alias", 0.95, r["matched"], "direct")
                 for r in await self._read(_LOOKUP_ALIAS, keys=keys, collections=scope)]
        return hits

    async def fulltext(self, query: str, limit: int, collections: Iterable[str] = ("default",)) -> list[EntityHit]:
        """Names and aliases sharing character bigrams (or Latin words) with
        ``query``; channel graph.fulltext, raw Lucene score."""
        q = lucene_terms(query)
        if not q:
            return []
        records = await self._read(_FULLTEXT_SEARCH, index=ENTITY_INDEX, q=q, limit=limit * 3, collections=list(collections))
        best: dict[str, EntityHit] = {}
        for r in records:
            if r["name"] not in best:
                best[r["name"]] = _hit(r, "graph.fulltext", r["score"], r["matched"], "direct")
        return list(best.values())[:limit]

    async def attribute_search(self, values: list[str], label: str = "", limit: int = 50, other_weight: float = 0.3,
                               collections: Iterable[str] = ("default",)) -> list[EntityHit]:
        """Entities linked to the attribute ``values`` (e.g. symptoms), scored
        by weighted coverage: over the distinct values, the best link weight
        (1.0 when the query names no label or the relation type contains the
        label, or the label contains it; ``other_weight`` otherwise), summed
        and divided by the number of values. Ties go to the entity with fewer
        facts (the more specific one). Channel graph.attribute; matched lists
        the covered values in query order."""
        distinct: dict[str, str] = {}
        for v in values:
            k = name_key(v)
            if k and k not in distinct:
                distinct[k] = v.strip()
        if not distinct:
            return []
        records = await self._read(_ATTRIBUTE, values=[{"keys": value_keys(v), "value": v} for v in distinct.values()],
                                   label=label.strip(), other=float(other_weight), limit=limit, collections=list(collections))
        order = list(distinct.values())
        n = len(distinct)
        return [
            _hit(r, "graph.attribute", float(r["covered"]) / n, "、".join(sorted(r["matched"], key=order.index)), "attribute")
            for r in records
        ]

    async def expand(self, seeds: list[tuple[str, float]], limit: int = 50,
                     collections: Iterable[str] = ("default",)) -> list[EntityHit]:
        """Weighted expansion from directly matched entities along meaningful
        edges only: PARENT_OF both ways, SAME_OBJECT, SAME_PROPERTY, same
        category. Score = seed score x edge weight; one-character entities are
        never reached (they only match their exact name). Channel graph.expand."""
        if not seeds:
            return []
        records = await self._read(_EXPAND, seeds=[{"name": n, "score": s} for n, s in seeds], collections=list(collections))
        seed_names = {n for n, _ in seeds}
        best: dict[str, EntityHit] = {}
        for r in records:
            if r["name"] in seed_names or len(name_key(r["name"])) <= 1:
                continue
            score = float(r["seed_score"]) * self.weights[r["relation"]]
            if r["name"] not in best or best[r["name"]].score < score:
                best[r["name"]] = _hit(r, "graph.expand", score, f"{r['relation']}:{r['seed']}", r["relation"])
        return sorted(best.values(), key=lambda h: -h.score)[:limit]

    async def category_members(self, categories: list[str], limit: int = 50,
                               collections: Iterable[str] = ("default",)) -> list[EntityHit]:
        """Members of the named categories (global route: the community
        view), most connected first; channel graph.category, score 0.5."""
        if not categories:
            return []
        return [_hit(r, "graph.category", 0.5, r["matched"], "category_member")
                for r in await self._read(_CATEGORY_MEMBERS, categories=categories, limit=limit, collections=list(collections))]

    async def category_summaries(self, categories: list[str], top_members: int = 10, top_facts: int = 8,
                                 collections: Iterable[str] = ("default",)) -> list[CategorySummary]:
        """The global route's community view of each named category that
        exists: member count, most connected members, and the facts most
        members share. Unknown categories are left out."""
        if not categories:
            return []
        scope = list(collections)
        sizes = await self._read(_CATEGORY_SUMMARY, categories=categories, top_members=top_members, collections=scope)
        facts = {r["category"]: r["facts"]
                 for r in await self._read(_CATEGORY_FACTS, categories=categories, top_facts=top_facts, collections=scope)}
        return [
            CategorySummary(r["category"], int(r["members"]), list(r["top"]),
                            [(f["predicate"], f["value"], int(f["members"])) for f in facts.get(r["category"], [])])
            for r in sizes
        ]
