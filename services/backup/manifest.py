"""The backup manifest and the decisions made from it; pure (no store access).

A backup is one directory::

    manifest.json                   this module's Manifest
    postgres.dump                   pg_dump custom format of GraphMesh's database
    neo4j/nodes.jsonl.gz            one node a line: {"i", "labels", "props"}
    neo4j/relationships.jsonl.gz    one relationship a line: {"s", "e", "type", "props"}

A store summary (``StoreSummary``) is what both stores are compared by:
per collection (documents, chunks), a fingerprint of every document's
(collection, id, content hash), and raw counts (PostgreSQL rows per table;
Neo4j nodes per label and relationships per type).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

FORMAT = "graphmesh-backup"
FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
PG_FILE = "postgres.dump"
NODES_FILE = "neo4j/nodes.jsonl.gz"
RELATIONSHIPS_FILE = "neo4j/relationships.jsonl.gz"
DATA_FILES = (PG_FILE, NODES_FILE, RELATIONSHIPS_FILE)
#: Tables whose rows do not make a database "hold data" (the migration log).
BOOKKEEPING_TABLES = frozenset({"public.schema_migrations"})


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


class RestoreRefused(BackupError):
    """The target stores are not empty (and --force was not given)."""


@dataclass
class StoreSummary:
    """What one store holds, as compared between stores and before/after.

    Attributes:
        collections: {collection: [documents, chunks]}.
        fingerprint: ``documents_fingerprint`` of the store's documents.
        counts: PostgreSQL {"tables": {schema.table: rows}}; Neo4j
            {"nodes": {label: n}, "relationships": {type: n}, "node_total": n,
            "relationship_total": n}.
    """

    collections: dict[str, list[int]] = field(default_factory=dict)
    fingerprint: str = ""
    counts: dict[str, Any] = field(default_factory=dict)


def documents_fingerprint(rows: Iterable[tuple[str, str, str]]) -> str:
    """sha256 (hex) of the sorted (collection, document id, content hash)
    triples: equal in two stores exactly when they hold the same documents
    in the same collections with the same content."""
    digest = hashlib.sha256()
    for collection, doc_id, content_hash in sorted((str(c), str(i), str(h or "")) for c, i, h in rows):
        digest.update(f"{collection}\x1f{doc_id}\x1f{content_hash}\n".encode("utf-8"))
    return digest.hexdigest()


def store_differences(pg: StoreSummary, graph: StoreSummary) -> list[str]:
    """How PostgreSQL's and Neo4j's documents disagree ([] = they agree):
    per collection document and chunk counts, then the fingerprint."""
    out = []
    for name in sorted(set(pg.collections) | set(graph.collections)):
        a, b = pg.collections.get(name, [0, 0]), graph.collections.get(name, [0, 0])
        if list(a) != list(b):
            out.append(f"collection {name!r}: PostgreSQL has {a[0]} documents / {a[1]} chunks, "
                       f"Neo4j {b[0]} / {b[1]}")
    if pg.fingerprint != graph.fingerprint:
        out.append("the document ids or content hashes differ between PostgreSQL and Neo4j"
                   + ("" if out else " (same counts)"))
    return out


def summary_changes(before: StoreSummary, after: StoreSummary, store: str) -> list[str]:
    """What changed in ``store`` between two summaries ([] = nothing)."""
    out = []
    if before.collections != after.collections:
        out.append(f"{store}: collection counts changed from {before.collections} to {after.collections}")
    if before.fingerprint != after.fingerprint:
        out.append(f"{store}: documents changed (fingerprint)")
    for key in sorted(set(before.counts) | set(after.counts)):
        if before.counts.get(key) != after.counts.get(key):
            out.append(f"{store}: {key} changed from {before.counts.get(key)} to {after.counts.get(key)}")
    return out


def holds_data(pg_tables: dict[str, int]) -> list[str]:
    """Tables of a PostgreSQL database that hold rows (bookkeeping aside)."""
    return sorted(t for t, n in pg_tables.items() if n and t not in BOOKKEEPING_TABLES)


def refusal(pg_tables: dict[str, int], graph_nodes: int) -> str:
    """Why the target stores are not empty ("" = both are): PostgreSQL
    tables with rows, Neo4j nodes. An existing schema without rows (a
    retriever started on the fresh database) counts as empty."""
    reasons = []
    full = holds_data(pg_tables)
    if full:
        shown = ", ".join(f"{t} ({pg_tables[t]} rows)" for t in full[:5])
        reasons.append(f"PostgreSQL holds data: {shown}" + (" ..." if len(full) > 5 else ""))
    if graph_nodes:
        reasons.append(f"Neo4j holds {graph_nodes} nodes")
    return "; ".join(reasons)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Manifest:
    """manifest.json of one backup.

    Attributes:
        created_at: ISO 8601 UTC time the backup was started.
        graphmesh_version: version of the GraphMesh that made it.
        pg_schema_version: highest schema_migrations version in the database.
        docgraph_version: DOCGRAPH_VERSION of the code that made it.
        postgres / neo4j: StoreSummary of each store at create time.
        consistency: {"stores_agree": bool, "differences": [...],
            "unchanged_during_backup": bool}.
        files: {relative path: {"sha256": hex, "bytes": n}} of DATA_FILES.
        pg_server_version: server_version of the PostgreSQL dumped.
    """

    created_at: str
    graphmesh_version: str
    pg_schema_version: int
    docgraph_version: int
    postgres: StoreSummary
    neo4j: StoreSummary
    consistency: dict[str, Any]
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    pg_server_version: str = ""
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        """Parses manifest.json.

        Raises:
            BackupError: not JSON, not a GraphMesh backup, an unknown
                format version, or a field missing or of the wrong type.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise BackupError(f"manifest.json is not JSON: {err}") from err
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BackupError("manifest.json is not a GraphMesh backup manifest (format field)")
        if data.get("format_version") != FORMAT_VERSION:
            raise BackupError(f"backup format version {data.get('format_version')!r} is not supported "
                              f"(this GraphMesh reads version {FORMAT_VERSION})")
        try:
            return cls(**{**data, "postgres": StoreSummary(**data["postgres"]), "neo4j": StoreSummary(**data["neo4j"])})
        except (KeyError, TypeError) as err:
            raise BackupError(f"manifest.json is incomplete or malformed: {err}") from err


def file_entries(folder: Path) -> dict[str, dict[str, Any]]:
    """{relative path: {"sha256", "bytes"}} of the data files in ``folder``."""
    return {name: {"sha256": sha256_file(folder / name), "bytes": (folder / name).stat().st_size} for name in DATA_FILES}


def verify_files(folder: Path, manifest: Manifest) -> list[str]:
    """Problems with the data files against the manifest ([] = all present
    with their recorded size and sha256)."""
    problems = []
    for name in DATA_FILES:
        entry = manifest.files.get(name)
        path = folder / name
        if entry is None:
            problems.append(f"{name}: not listed in the manifest")
        elif not path.is_file():
            problems.append(f"{name}: missing")
        elif path.stat().st_size != entry.get("bytes") or sha256_file(path) != entry.get("sha256"):
            problems.append(f"{name}: checksum mismatch (corrupt or changed since the backup)")
    return problems


def version_problems(manifest: Manifest, pg_schema_latest: int, docgraph_version: int) -> tuple[list[str], list[str]]:
    """(errors, warnings) of restoring ``manifest`` with this code: a
    PostgreSQL schema newer than the code knows is an error (the services
    could not read it); an older one is migrated by retriever_pg when it
    starts; another DOCGRAPH version is a warning (documents are relinked
    when they are next ingested)."""
    errors, warnings = [], []
    if manifest.pg_schema_version > pg_schema_latest:
        errors.append(f"the backup's PostgreSQL schema is version {manifest.pg_schema_version}, newer than this "
                      f"GraphMesh knows ({pg_schema_latest}): restore it with the GraphMesh that made it "
                      f"({manifest.graphmesh_version}) or a newer one")
    elif manifest.pg_schema_version < pg_schema_latest:
        warnings.append(f"the backup's PostgreSQL schema is version {manifest.pg_schema_version}; retriever_pg "
                        f"migrates it to {pg_schema_latest} when it starts")
    if manifest.docgraph_version != docgraph_version:
        warnings.append(f"the backup's document graph is DOCGRAPH version {manifest.docgraph_version}, this "
                        f"GraphMesh builds {docgraph_version}: documents are relinked when next ingested")
    return errors, warnings
