"""Where ImportDocuments operations are kept: ``PgOperations`` (a table in
PostgreSQL, so that another gateway replica, or the gateway after a restart,
still reports them) or ``MemoryOperations`` (this process only). Both offer
the same async methods; ``open_store`` picks one from the settings.

Table ``gateway_operations`` (created at open, parameters only):
name text primary key, done, cancel_requested, metadata / response / error
(serialized IngestOperationMetadata, IngestResponse, google.rpc.Status),
created_at, updated_at, heartbeat_at (timestamptz), owner (host name)."""
from __future__ import annotations

import asyncio
import copy
import logging
from datetime import datetime, timedelta

import asyncpg
from google.rpc import status_pb2

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.operations.state import OperationRecord, after, is_orphan

log = logging.getLogger("graphmesh.gateway.operations")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS gateway_operations (
    name text PRIMARY KEY,
    done boolean NOT NULL DEFAULT false,
    cancel_requested boolean NOT NULL DEFAULT false,
    metadata bytea NOT NULL,
    response bytea,
    error bytea,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    owner text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS gateway_operations_listing ON gateway_operations (created_at DESC, name DESC);
"""
#: Advisory lock key held while creating the table (replicas start together).
_SCHEMA_LOCK = 0x67617465  # "gate"
#: What a database that is down, starting or stopping raises: no connection,
#: a lost one, or SQLSTATE 57P01-57P03 ("terminating connection due to
#: administrator command", "... because of crash of another server process",
#: "the database system is starting up / shutting down").
_UNAVAILABLE = (OSError, asyncio.TimeoutError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError,
                asyncpg.AdminShutdownError, asyncpg.CrashShutdownError, asyncpg.CannotConnectNowError)
_COLUMNS = "name, done, cancel_requested, metadata, response, error, created_at, updated_at, heartbeat_at, owner"


class OperationsUnavailable(Exception):
    """The operations database could not be reached (UNAVAILABLE to callers)."""


class MemoryOperations:
    """Operations in this process's memory (lost when it stops)."""

    durable = False

    def __init__(self) -> None:
        self._records: dict[str, OperationRecord] = {}

    async def open(self) -> None:
        """Nothing to open."""

    async def close(self) -> None:
        """Nothing to close."""

    async def create(self, record: OperationRecord) -> None:
        """Adds a new operation."""
        self._records[record.name] = copy.deepcopy(record)

    async def save(self, record: OperationRecord) -> bool | None:
        """Writes ``record``'s progress and outcome (not its cancel flag) if
        the stored one is still running. Returns the stored cancel flag, or
        None when the operation is gone or was ended meanwhile."""
        stored = self._records.get(record.name)
        if stored is None or stored.done:
            return None
        cancel = stored.cancel_requested
        self._records[record.name] = copy.deepcopy(record)
        self._records[record.name].cancel_requested = cancel
        return cancel

    async def get(self, name: str) -> OperationRecord | None:
        """The operation ``name``, None when unknown."""
        record = self._records.get(name)
        return copy.deepcopy(record) if record is not None else None

    async def list(self, done: bool | None, cursor: tuple[datetime, str] | None, limit: int) -> list[OperationRecord]:
        """Up to ``limit`` operations after ``cursor``, newest first, all or only (not) done."""
        ordered = sorted(self._records.values(), key=lambda r: (r.created, r.name), reverse=True)
        return [copy.deepcopy(r) for r in ordered if (done is None or r.done == done) and after(r, cursor)][:limit]

    async def request_cancel(self, name: str, now: datetime) -> OperationRecord | None:
        """Sets the cancel flag of a running operation; the operation after it (None: unknown)."""
        record = self._records.get(name)
        if record is not None and not record.done:
            record.cancel_requested, record.updated = True, now
        return await self.get(name)

    async def delete(self, name: str) -> bool:
        """Deletes a finished operation; False when unknown or still running."""
        record = self._records.get(name)
        if record is None or not record.done:
            return False
        del self._records[name]
        return True

    async def heartbeat(self, names: list[str], now: datetime) -> None:
        """Marks the running operations ``names`` alive at ``now``."""
        for name in names:
            if name in self._records and not self._records[name].done:
                self._records[name].heartbeat = now

    async def abort_orphans(self, lease: float, error: status_pb2.Status, now: datetime, owner: str = "") -> int:
        """Ends with ``error`` every running operation that lost its gateway
        (state.is_orphan); returns how many."""
        stale = [r for r in self._records.values() if is_orphan(r, now, lease, owner)]
        for record in stale:
            record.done, record.error, record.updated, record.heartbeat = True, error, now, now
        return len(stale)

    async def prune(self, keep: int) -> None:
        """Deletes the finished operations beyond the ``keep`` newest."""
        finished = sorted((r for r in self._records.values() if r.done), key=lambda r: (r.created, r.name), reverse=True)
        for record in finished[keep:]:
            del self._records[record.name]


class PgOperations:
    """Operations in PostgreSQL at ``dsn``. The pool opens on first use
    (or ``open``), so a database that is down at start only makes the
    operations RPCs UNAVAILABLE until it is back."""

    durable = True

    def __init__(self, dsn: str, connect_timeout: float = 5.0) -> None:
        self._dsn = dsn
        self._timeout = connect_timeout
        self._pool: asyncpg.Pool | None = None
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        """Opens the pool and creates the table (idempotent).

        Raises:
            OperationsUnavailable: the database cannot be reached.
        """
        await self._ready()

    async def _ready(self) -> asyncpg.Pool:
        async with self._lock:
            if self._pool is None:
                try:
                    pool = await asyncpg.create_pool(self._dsn, min_size=0, max_size=4, timeout=self._timeout)
                    async with pool.acquire() as conn, conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK)
                        await conn.execute(_SCHEMA)
                except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
                    raise OperationsUnavailable(f"operations database unavailable: {type(err).__name__}: {err}") from err
                self._pool = pool
            return self._pool

    async def _run(self, method: str, query: str, *args):
        pool = await self._ready()
        try:
            return await getattr(pool, method)(query, *args)
        except _UNAVAILABLE as err:
            raise OperationsUnavailable(f"operations database unavailable: {type(err).__name__}: {err}") from err

    async def close(self) -> None:
        """Closes the pool."""
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def create(self, record: OperationRecord) -> None:
        """Inserts a new operation."""
        await self._run("execute", f"INSERT INTO gateway_operations ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                        *_row_values(record))

    async def save(self, record: OperationRecord) -> bool | None:
        """As MemoryOperations.save."""
        _, done, _, metadata, response, error, _, updated, heartbeat, _ = _row_values(record)
        return await self._run(
            "fetchval", "UPDATE gateway_operations SET done = $2, metadata = $3, response = $4, error = $5, updated_at = $6, "
            "heartbeat_at = $7 WHERE name = $1 AND NOT done RETURNING cancel_requested",
            record.name, done, metadata, response, error, updated, heartbeat)

    async def get(self, name: str) -> OperationRecord | None:
        """As MemoryOperations.get."""
        row = await self._run("fetchrow", f"SELECT {_COLUMNS} FROM gateway_operations WHERE name = $1", name)
        return _record(row) if row is not None else None

    async def list(self, done: bool | None, cursor: tuple[datetime, str] | None, limit: int) -> list[OperationRecord]:
        """As MemoryOperations.list."""
        created, name = cursor if cursor is not None else (None, None)
        rows = await self._run(
            "fetch", f"SELECT {_COLUMNS} FROM gateway_operations WHERE ($1::boolean IS NULL OR done = $1) "
            "AND ($2::timestamptz IS NULL OR (created_at, name) < ($2::timestamptz, $3::text)) "
            "ORDER BY created_at DESC, name DESC LIMIT $4", done, created, name, limit)
        return [_record(row) for row in rows]

    async def request_cancel(self, name: str, now: datetime) -> OperationRecord | None:
        """As MemoryOperations.request_cancel."""
        await self._run("execute", "UPDATE gateway_operations SET cancel_requested = true, updated_at = $2 "
                        "WHERE name = $1 AND NOT done", name, now)
        return await self.get(name)

    async def delete(self, name: str) -> bool:
        """As MemoryOperations.delete."""
        return await self._run("fetchval", "DELETE FROM gateway_operations WHERE name = $1 AND done RETURNING true", name) is True

    async def heartbeat(self, names: list[str], now: datetime) -> None:
        """As MemoryOperations.heartbeat."""
        if names:
            await self._run("execute", "UPDATE gateway_operations SET heartbeat_at = $2 WHERE name = ANY($1::text[]) AND NOT done",
                            names, now)

    async def abort_orphans(self, lease: float, error: status_pb2.Status, now: datetime, owner: str = "") -> int:
        """As MemoryOperations.abort_orphans."""
        rows = await self._run("fetch", "UPDATE gateway_operations SET done = true, error = $1, updated_at = $2, heartbeat_at = $2 "
                               "WHERE NOT done AND (heartbeat_at < $3 OR ($4 <> '' AND owner = $4)) RETURNING name",
                               error.SerializeToString(), now, now - timedelta(seconds=lease), owner)
        return len(rows)

    async def prune(self, keep: int) -> None:
        """As MemoryOperations.prune."""
        await self._run("execute", "DELETE FROM gateway_operations WHERE name IN (SELECT name FROM gateway_operations WHERE done "
                        "ORDER BY created_at DESC, name DESC OFFSET $1)", keep)


def _row_values(r: OperationRecord) -> tuple:
    return (r.name, r.done, r.cancel_requested, r.metadata.SerializeToString(),
            r.response.SerializeToString() if r.response is not None else None,
            r.error.SerializeToString() if r.error is not None else None, r.created, r.updated, r.heartbeat, r.owner)


def _record(row: asyncpg.Record) -> OperationRecord:
    return OperationRecord(
        name=row["name"], done=row["done"], cancel_requested=row["cancel_requested"],
        metadata=gateway_pb2.IngestOperationMetadata.FromString(row["metadata"]),
        response=gateway_pb2.IngestResponse.FromString(row["response"]) if row["response"] is not None else None,
        error=status_pb2.Status.FromString(row["error"]) if row["error"] is not None else None,
        created=row["created_at"], updated=row["updated_at"], heartbeat=row["heartbeat_at"], owner=row["owner"])


def open_store(dsn: str) -> MemoryOperations | PgOperations:
    """PgOperations over ``dsn``, or MemoryOperations (logged) when it is ""."""
    if dsn:
        return PgOperations(dsn)
    log.warning("operations are kept in memory: set GRAPHMESH_GATEWAY_OPERATIONS__DSN (or GRAPHMESH_RETRIEVER_PG_DSN) "
                "for ImportDocuments operations that outlive a gateway restart")
    return MemoryOperations()
