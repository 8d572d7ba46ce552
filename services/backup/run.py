"""``create_backup`` and ``restore_backup``: both stores into one backup
directory and back (docs/reliability.md, "Backup and restore").

Consistency at create: both stores are summarised (per-collection document
and chunk counts, a fingerprint of every document's collection, id and
content hash, rows per table, nodes per label, relationships per type)
before and after the dump. The backup is refused when the two stores'
documents disagree (unless ``allow_mismatch``: recorded in the manifest) or
when either summary changed while it ran (a write during the backup).
"""
from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from neo4j import AsyncGraphDatabase

from services.backup import graph, postgres
from services.backup.manifest import (
    MANIFEST_FILE,
    PG_FILE,
    BackupError,
    Manifest,
    RestoreRefused,
    StoreSummary,
    file_entries,
    refusal,
    store_differences,
    summary_changes,
    verify_files,
    version_problems,
)


@dataclass(frozen=True)
class Targets:
    """The two stores: a PostgreSQL DSN (postgresql:// URI) and a Neo4j
    Bolt URI with its credentials (user None: no authentication) and database."""

    pg_dsn: str
    neo4j_uri: str
    neo4j_user: str | None = None
    neo4j_password: str | None = None
    neo4j_database: str = "neo4j"

    @property
    def auth(self) -> tuple[str, str] | None:
        return (self.neo4j_user, self.neo4j_password or "") if self.neo4j_user else None


@dataclass
class RestoreReport:
    """What a restore did: ``warnings`` (versions, a backup made with
    --allow-mismatch), ``problems`` (restored counts that differ from the
    manifest, store-checker findings; [] = verified), the restored summaries."""

    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    postgres: StoreSummary | None = None
    neo4j: StoreSummary | None = None


def _graphmesh_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("graphmesh")
    except PackageNotFoundError:
        return "unknown"


async def create_backup(folder: Path, targets: Targets, *, pg_bin: str | None = None,
                        allow_mismatch: bool = False) -> Manifest:
    """Backs both stores up into ``folder`` (created; written as
    ``folder.partial`` and renamed when complete, so a folder with a
    manifest is a whole backup). The folder is its owner's alone (0700, its
    files 0600): it holds the text of every document.

    Returns:
        the Manifest written.
    Raises:
        BackupError: ``folder`` exists and is not empty; pg_dump not found
            or failed; the stores disagree (and not ``allow_mismatch``); a
            store changed during the backup; a graph value a backup cannot hold.
        OSError / asyncpg.PostgresError / neo4j.exceptions.Neo4jError: a store
            cannot be reached.
    """
    from domains.facts import DOCGRAPH_VERSION

    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise BackupError(f"{folder} exists and is not an empty folder; choose a new backup folder")
    work = folder.with_name(folder.name + ".partial")
    if work.exists():
        raise BackupError(f"{work} exists (an interrupted backup?); remove it first")
    tools = postgres.find_tools(pg_bin)
    created_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    driver = AsyncGraphDatabase.driver(targets.neo4j_uri, auth=targets.auth)
    try:
        pg_before, schema_version, server = await postgres.summary(targets.pg_dsn)
        graph_before = await graph.summary(driver, targets.neo4j_database)
        differences = store_differences(pg_before, graph_before)
        if differences and not allow_mismatch:
            raise BackupError("PostgreSQL and Neo4j disagree: " + "; ".join(differences)
                              + ". A restore would carry this over; ingest the documents again (or delete them) "
                              "until both agree, or pass --allow-mismatch to back up anyway (recorded in the manifest)")
        work.mkdir(parents=True, mode=0o700)  # a backup holds every document's text: its owner's alone
        try:
            await asyncio.to_thread(postgres.dump, targets.pg_dsn, work / PG_FILE, tools)
            await graph.export(driver, targets.neo4j_database, work)
            pg_after, _, _ = await postgres.summary(targets.pg_dsn)
            graph_after = await graph.summary(driver, targets.neo4j_database)
            changes = [*summary_changes(pg_before, pg_after, "PostgreSQL"),
                       *summary_changes(graph_before, graph_after, "Neo4j")]
            if changes:
                raise BackupError("the stores changed while the backup ran (" + "; ".join(changes[:4])
                                  + "); pause ingestion and deletes, then run the backup again")
            manifest = Manifest(created_at=created_at, graphmesh_version=_graphmesh_version(),
                                pg_schema_version=schema_version, docgraph_version=DOCGRAPH_VERSION,
                                postgres=pg_before, neo4j=graph_before,
                                consistency={"stores_agree": not differences, "differences": differences,
                                             "unchanged_during_backup": True},
                                files=file_entries(work), pg_server_version=str(server))
            with open(work / MANIFEST_FILE, "w", encoding="utf-8") as f:
                f.write(manifest.to_json())
                f.flush()
                os.fsync(f.fileno())
            for path in work.rglob("*"):
                path.chmod(0o700 if path.is_dir() else 0o600)
            if folder.exists():
                folder.rmdir()
            work.rename(folder)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    finally:
        await driver.close()
    return manifest


def read_backup(folder: Path) -> Manifest:
    """The manifest of the backup in ``folder``, its files verified.

    Raises:
        BackupError: no manifest, an unreadable one, or a data file missing
            or not matching its checksum.
    """
    path = Path(folder) / MANIFEST_FILE
    if not path.is_file():
        raise BackupError(f"{folder} holds no {MANIFEST_FILE}: not a GraphMesh backup (or an incomplete one)")
    manifest = Manifest.from_json(path.read_text(encoding="utf-8"))
    problems = verify_files(Path(folder), manifest)
    if problems:
        raise BackupError("the backup is damaged: " + "; ".join(problems))
    return manifest


async def restore_backup(folder: Path, targets: Targets, *, pg_bin: str | None = None, force: bool = False,
                         check: bool = True) -> RestoreReport:
    """Restores the backup in ``folder`` into empty stores, then verifies
    them: the restored counts and fingerprints against the manifest, and
    (``check``) the store checker (services/common/store_check.py) with
    Neo4j checked against what PostgreSQL now holds.

    Empty: no PostgreSQL table with rows (an existing GraphMesh schema
    without rows is replaced) and no Neo4j node. ``force`` replaces
    non-empty stores: pg_restore --clean drops every object the backup
    holds before recreating it (other tables stay), and every Neo4j node
    and relationship is deleted (constraints and indexes stay). A backup
    without the HNSW index (taken during a first load) gets it built, with
    a warning.

    Raises:
        RestoreRefused: a store is not empty and not ``force``.
        BackupError: the backup is damaged or made by a newer schema;
            pg_restore failed (nothing of it applied: one transaction); the
            graph import failed (run again with force).
    """
    from domains.facts import DOCGRAPH_VERSION
    from services.common.store_check import check_stores, expected_from_postgres
    from services.retriever_graph.kg_store import KnowledgeGraphStore
    from services.retriever_graph.store import GraphStore
    from services.retriever_pg.store import LATEST_SCHEMA_VERSION, build_missing_vector_index

    folder = Path(folder)
    manifest = read_backup(folder)
    errors, warnings = version_problems(manifest, LATEST_SCHEMA_VERSION, DOCGRAPH_VERSION)
    if errors:
        raise BackupError("; ".join(errors))
    if not manifest.consistency.get("stores_agree", True):
        warnings.append("the backup was made while the stores disagreed (--allow-mismatch): "
                        + "; ".join(manifest.consistency.get("differences", [])))
    tools = postgres.find_tools(pg_bin)
    report = RestoreReport(warnings=warnings)
    store = GraphStore(targets.neo4j_uri, targets.neo4j_user, targets.neo4j_password, targets.neo4j_database)
    await store.open()
    try:
        import asyncpg

        conn = await asyncpg.connect(targets.pg_dsn)
        try:
            tables = await postgres.table_rows(conn)
        finally:
            await conn.close()
        nodes = await graph.node_count(store.driver, store.database)
        reason = refusal(tables, nodes)
        if reason and not force:
            raise RestoreRefused(
                f"the target stores are not empty ({reason}). Restore into an empty PostgreSQL database and an "
                "empty Neo4j database, or pass --force to replace their contents: PostgreSQL objects of the backup "
                "are dropped and recreated, every Neo4j node and relationship is deleted")
        await asyncio.to_thread(postgres.restore, targets.pg_dsn, folder / PG_FILE, tools, clean=bool(tables))
        if await build_missing_vector_index(targets.pg_dsn):
            report.warnings.append("the backup held no HNSW index, and the restore built it: nothing is lost (a "
                                   "store under 2,000 chunks rebuilds the index up to a minute after each ingest, "
                                   "and the backup was taken in that minute, or during a first or bulk load)")
        if nodes:
            await graph.wipe(store.driver, store.database)
        await store.migrate()
        await KnowledgeGraphStore(store.driver, store.database).migrate()
        await graph.import_graph(store.driver, store.database, folder)
        pg_now, _, _ = await postgres.summary(targets.pg_dsn)
        report.neo4j = await graph.summary(store.driver, store.database)
    finally:
        await store.close()
    restored_tables = {t: pg_now.counts["tables"].get(t) for t in manifest.postgres.counts.get("tables", {})}
    report.postgres = pg_now
    report.problems += summary_changes(manifest.postgres, StoreSummary(pg_now.collections, pg_now.fingerprint,
                                                                       {"tables": restored_tables}), "PostgreSQL")
    report.problems += summary_changes(manifest.neo4j, report.neo4j, "Neo4j")
    if check:
        expected = await expected_from_postgres(targets.pg_dsn)
        report.problems += await check_stores(targets.pg_dsn, targets.neo4j_uri, expected, auth=targets.auth,
                                              database=targets.neo4j_database)
    return report
