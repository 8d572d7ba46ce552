"""Neo4j side of a backup: export and import of the whole graph of
GraphMesh's database through the Bolt driver (Community edition, no APOC).

Export streams every node (labels, properties) and every relationship
(type, properties, its end nodes as line numbers of the node file) into
gzipped JSON lines. Import creates them in batched, parameterised
transactions into a database whose constraints and indexes the stores'
own ``migrate`` made: labels as a parameter (Cypher 5.26 dynamic labels
``$($labels)``), relationship types quoted as identifiers (backticks
doubled, kg_store.relation_type), one statement per type, because Neo4j
5.26 gives every relationship created through a dynamic ``$(...)`` type
the type of the first one it created with that statement.

Property values: strings, integers, floats, booleans, lists of them, and
byte arrays (written as {"bytes": base64}; a map is never a Neo4j property
value, so this is unambiguous). GraphMesh stores no temporal or spatial
values; one met on export stops the backup with its node and property.
"""
from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any, Iterator

from neo4j import AsyncDriver

from services.retriever_graph.kg_store import relation_type
from services.backup.manifest import NODES_FILE, RELATIONSHIPS_FILE, BackupError, StoreSummary, documents_fingerprint

BATCH = 1000
_DELETE_BATCH = 10000

_NODES = "MATCH (n) RETURN elementId(n) AS id, labels(n) AS labels, properties(n) AS props"
_RELATIONSHIPS = ("MATCH (a)-[r]->(b) RETURN elementId(a) AS s, elementId(b) AS e, type(r) AS type, "
                  "properties(r) AS props")
_CREATE_NODES = ("UNWIND $rows AS row CREATE (n:$($labels)) SET n = row.props "
                 "RETURN row.i AS i, elementId(n) AS id")
# {rel}: a quoted identifier from kg_store.relation_type (backticks doubled),
# never raw text: Neo4j 5.26 caches the type of a dynamic ``$(...)`` type
# across calls and rows (every relationship got the first one's type).
_CREATE_RELATIONSHIPS = ("UNWIND $rows AS row MATCH (a) WHERE elementId(a) = row.s MATCH (b) WHERE elementId(b) = row.e "
                         "CREATE (a)-[r:{rel}]->(b) SET r = row.props RETURN count(r) AS n")
#: Longest relationship type restored (Neo4j's own limit is far above).
MAX_TYPE_CHARS = 1024
_COUNTS = """
MATCH (d:Document)
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk)
RETURN coalesce(d.collection, 'default') AS collection, count(DISTINCT d) AS documents, count(c) AS chunks
"""


def _scalar(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(bytes(value)).decode("ascii")}
    raise BackupError(f"{where} has a value of type {type(value).__name__}; backups hold strings, numbers, "
                      "booleans, byte arrays and lists of them")


def encode_properties(props: dict[str, Any], where: str) -> dict[str, Any]:
    """JSON-able form of a node's or relationship's properties.

    Raises:
        BackupError: a temporal, spatial or other value (``where`` names it).
    """
    out = {}
    for name, value in props.items():
        at = f"{where} property {name!r}"
        out[name] = [_scalar(v, at) for v in value] if isinstance(value, list) else _scalar(value, at)
    return out


def decode_properties(props: dict[str, Any]) -> dict[str, Any]:
    """Inverse of ``encode_properties``."""
    def one(v: Any) -> Any:
        return base64.b64decode(v["bytes"]) if isinstance(v, dict) else v

    return {k: [one(x) for x in v] if isinstance(v, list) else one(v) for k, v in props.items()}


def _lines(path: Path) -> Iterator[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                yield json.loads(line)
            except json.JSONDecodeError as err:
                raise BackupError(f"{path.name} line {n} is not JSON: {err}") from err


async def node_count(driver: AsyncDriver, database: str) -> int:
    """Nodes in the database (Neo4j's count store: instant)."""
    records, _, _ = await driver.execute_query("MATCH (n) RETURN count(n) AS n", database_=database)
    return int(records[0]["n"])


async def summary(driver: AsyncDriver, database: str) -> StoreSummary:
    """StoreSummary of the graph: documents and chunks per collection, the
    documents' fingerprint, nodes per label, relationships per type."""
    async def rows(query: str) -> list:
        records, _, _ = await driver.execute_query(query, database_=database)
        return records

    collections = {r["collection"]: [int(r["documents"]), int(r["chunks"])] for r in await rows(_COUNTS)}
    docs = await rows("MATCH (d:Document) RETURN coalesce(d.collection, 'default') AS c, d.id AS id, d.content_hash AS h")
    labels = {r["label"]: int(r["n"]) for r in await rows("MATCH (n) UNWIND labels(n) AS label RETURN label, count(*) AS n")}
    types = {r["type"]: int(r["n"]) for r in await rows("MATCH ()-[r]->() RETURN type(r) AS type, count(*) AS n")}
    nodes = int((await rows("MATCH (n) RETURN count(n) AS n"))[0]["n"])
    rels = int((await rows("MATCH ()-[r]->() RETURN count(r) AS n"))[0]["n"])
    return StoreSummary(dict(sorted(collections.items())),
                        documents_fingerprint((r["c"], r["id"], r["h"]) for r in docs),
                        {"nodes": dict(sorted(labels.items())), "relationships": dict(sorted(types.items())),
                         "node_total": nodes, "relationship_total": rels})


async def export(driver: AsyncDriver, database: str, folder: Path) -> tuple[int, int]:
    """Writes NODES_FILE and RELATIONSHIPS_FILE under ``folder``; returns
    (nodes, relationships) written. Each file is one streamed read.

    Raises:
        BackupError: a property value a backup cannot hold, or a
            relationship to a node created after the node file was read
            (a write during the backup).
    """
    (folder / NODES_FILE).parent.mkdir(parents=True, exist_ok=True)
    index: dict[str, int] = {}
    async with driver.session(database=database, default_access_mode="READ") as session:
        with gzip.open(folder / NODES_FILE, "wt", encoding="utf-8") as out:
            result = await session.run(_NODES)
            async for r in result:
                i = index.setdefault(r["id"], len(index))
                props = encode_properties(dict(r["props"]), f"node {':'.join(r['labels'])} #{i}")
                out.write(json.dumps({"i": i, "labels": list(r["labels"]), "props": props}, ensure_ascii=False) + "\n")
        rels = 0
        with gzip.open(folder / RELATIONSHIPS_FILE, "wt", encoding="utf-8") as out:
            result = await session.run(_RELATIONSHIPS)
            async for r in result:
                if r["s"] not in index or r["e"] not in index:
                    raise BackupError("a relationship ends at a node created during the backup; "
                                      "stop ingestion and run the backup again")
                props = encode_properties(dict(r["props"]), f"relationship {r['type']} #{rels}")
                out.write(json.dumps({"s": index[r["s"]], "e": index[r["e"]], "type": r["type"], "props": props},
                                     ensure_ascii=False) + "\n")
                rels += 1
    return len(index), rels


async def wipe(driver: AsyncDriver, database: str) -> int:
    """Deletes every node and relationship, a batch per transaction;
    constraints and indexes stay. Returns the nodes deleted."""
    deleted = 0
    while True:
        records, _, _ = await driver.execute_query(
            "MATCH (n) WITH n LIMIT $n DETACH DELETE n RETURN count(*) AS n", {"n": _DELETE_BATCH}, database_=database)
        if not records[0]["n"]:
            return deleted
        deleted += int(records[0]["n"])


async def _write_batch(driver: AsyncDriver, database: str, query: str, **params: Any) -> list:
    async def work(tx: Any) -> list:
        result = await tx.run(query, params)
        return [r async for r in result]

    async with driver.session(database=database) as session:
        return await session.execute_write(work)


async def import_graph(driver: AsyncDriver, database: str, folder: Path) -> tuple[int, int]:
    """Creates the nodes and relationships of the files under ``folder``
    (batches of BATCH per transaction, one label set or relationship type
    per batch); returns (nodes, relationships).

    Raises:
        BackupError: a malformed line, or a relationship naming a node
            that is not in the node file.
    """
    created: dict[int, str] = {}
    pending: dict[tuple, list[dict]] = {}

    async def flush_nodes(labels: tuple) -> None:
        rows = pending.pop(labels)
        for r in await _write_batch(driver, database, _CREATE_NODES, rows=rows, labels=list(labels)):
            created[int(r["i"])] = r["id"]

    for line in _lines(folder / NODES_FILE):
        try:
            labels = tuple(str(x) for x in line["labels"])
            pending.setdefault(labels, []).append({"i": int(line["i"]), "props": decode_properties(line["props"])})
        except (KeyError, TypeError, ValueError) as err:
            raise BackupError(f"{NODES_FILE}: malformed node line {line!r:.200}") from err
        if len(pending[labels]) >= BATCH:
            await flush_nodes(labels)
    for labels in list(pending):
        await flush_nodes(labels)
    rels = 0

    async def flush_relationships(kind: tuple) -> int:
        rows = pending.pop(kind)
        query = _CREATE_RELATIONSHIPS.format(rel=relation_type(kind[0]))
        return int((await _write_batch(driver, database, query, rows=rows))[0]["n"])

    for line in _lines(folder / RELATIONSHIPS_FILE):
        try:
            kind = (str(line["type"]),)
            if not 0 < len(kind[0]) <= MAX_TYPE_CHARS or "\x00" in kind[0]:
                raise BackupError(f"{RELATIONSHIPS_FILE}: relationship type {kind[0][:80]!r} is empty, too long "
                                  "or holds a NUL character")
            pending.setdefault(kind, []).append({"s": created[int(line["s"])], "e": created[int(line["e"])],
                                                 "props": decode_properties(line["props"])})
        except KeyError as err:
            raise BackupError(f"{RELATIONSHIPS_FILE}: relationship to node {err} not in {NODES_FILE}") from err
        except (TypeError, ValueError) as err:
            raise BackupError(f"{RELATIONSHIPS_FILE}: malformed relationship line {line!r:.200}") from err
        if len(pending[kind]) >= BATCH:
            rels += await flush_relationships(kind)
    for kind in list(pending):
        rels += await flush_relationships(kind)
    await driver.execute_query("CALL db.awaitIndexes(300)", database_=database)
    return len(created), rels
