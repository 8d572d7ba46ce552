"""Embedded PostgreSQL (pgserver: PostgreSQL + pgvector + pg_trgm) for
development and tests.

The server listens on a unix socket only (no TCP port) and keeps running
after the Python process that started it exits, so several services and CLI
runs can share it. Stop it explicitly with :func:`stop_embedded_postgres`.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import warnings
from urllib.parse import quote

__all__ = ["import_pgserver", "start_embedded_postgres", "stop_embedded_postgres", "embedded_dsn"]


def import_pgserver() -> None:
    """Imports pgserver once, without the warning platformdirs prints when
    XDG_RUNTIME_DIR is unset (pgserver asks for a runtime folder when it is
    imported; platformdirs falls back to one under /tmp, which serves, and
    the warning was printed on every ``graphmesh up`` and ``down``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
        import pgserver  # noqa: F401

_PG_USER = "postgres"


def _system_user() -> str | None:
    # pgserver runs the server as the system user "pgserver" when we are root
    # (PostgreSQL refuses to run as root).
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return "pgserver"
    return None


def _dsn_from_pgdata(pgdata: pathlib.Path, database: str) -> str | None:
    import_pgserver()
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return None
    if info.socket_dir is not None:
        port = info.port or 5432
        host = quote(str(info.socket_dir), safe="/")
        return f"postgresql://{_PG_USER}@/{quote(database)}?host={host}&port={port}"
    if info.hostname and info.port:
        return f"postgresql://{_PG_USER}@{info.hostname}:{info.port}/{quote(database)}"
    raise RuntimeError(f"postmaster.pid in {pgdata} names neither a socket nor a port")


def embedded_dsn(data_dir: pathlib.Path, database: str = "postgres") -> str | None:
    """DSN of the embedded server running in ``data_dir``, or None when no
    server is running there. Starts nothing.

    Args:
        data_dir: the server's data directory (PGDATA).
        database: database name to put in the DSN.

    Raises:
        RuntimeError: postmaster.pid names neither a socket nor a port.
    """
    return _dsn_from_pgdata(pathlib.Path(data_dir).expanduser().resolve(), database)


def start_embedded_postgres(data_dir: pathlib.Path) -> str:
    """Starts, or reuses when already running, a pgserver PostgreSQL whose
    data directory is ``data_dir`` (created and initialised when missing;
    parent directories are created too).

    The server is started with ``cleanup_mode=None``: it keeps running after
    this process exits. Blocking (initdb + start take a few seconds the first
    time); call it through ``asyncio.to_thread`` from async code.

    Args:
        data_dir: PGDATA directory. Must be empty, missing, or an existing
            pgserver data directory.

    Returns:
        An asyncpg-usable DSN for database "postgres", user "postgres"
        (trust auth) over the unix socket, e.g.
        ``postgresql://postgres@/postgres?host=/path/to/socket/dir&port=5432``.

    Raises:
        subprocess.CalledProcessError: initdb or pg_ctl failed (the server log
            is ``data_dir/log``).
        subprocess.TimeoutExpired: the server did not start in time.
        RuntimeError: the server did not come up or exposes no address.
        OSError: data_dir cannot be created or its permissions set.
    """
    import_pgserver()
    import pgserver
    from pgserver.postgres_server import PostgresServer

    pgdata = pathlib.Path(data_dir).expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    dsn = _dsn_from_pgdata(pgdata, "postgres")
    if dsn is None:
        # A cached handle whose server was stopped (e.g. by
        # stop_embedded_postgres in this process): start it again.
        with PostgresServer._lock:
            server.ensure_postgres_running()
        dsn = _dsn_from_pgdata(pgdata, "postgres")
    if dsn is None:
        raise RuntimeError(f"embedded PostgreSQL in {pgdata} is not running; see {pgdata / 'log'}")
    return dsn


def stop_embedded_postgres(data_dir: pathlib.Path, *, timeout_s: float = 60.0) -> bool:
    """Stops the embedded server of ``data_dir`` (``pg_ctl -m fast stop``:
    open connections are closed, data is kept).

    Args:
        data_dir: PGDATA directory given to :func:`start_embedded_postgres`.
        timeout_s: seconds to wait for the server to stop.

    Returns:
        True when a running server was stopped, False when none was running.

    Raises:
        subprocess.CalledProcessError: pg_ctl failed.
        subprocess.TimeoutExpired: the server did not stop within timeout_s.
    """
    import_pgserver()
    from pgserver import pg_ctl  # type: ignore[attr-defined]
    from pgserver.utils import PostmasterInfo

    pgdata = pathlib.Path(data_dir).expanduser().resolve()
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    if info is None or not info.is_running():
        return False
    kwargs: dict = {"timeout": timeout_s}
    user = _system_user()
    if user is not None:
        kwargs["user"] = user
    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, **kwargs)
    except subprocess.CalledProcessError:
        still = PostmasterInfo.read_from_pgdata(pgdata)
        if still is None or not still.is_running():
            return True  # stopped concurrently
        raise
    return True
