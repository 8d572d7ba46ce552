"""PgOperations over a real PostgreSQL that refuses new connections (a
server shutting down or starting up answers SQLSTATE 57P03, "the database
system is shutting down / starting up"): the store raises
OperationsUnavailable, which the operations RPCs answer UNAVAILABLE and the
runner's heartbeat logs and survives, instead of letting asyncpg's
CannotConnectNowError through (INTERNAL to callers; the heartbeat task
ended for good)."""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
from pathlib import Path

import asyncpg
import pytest

from services.gateway.operations import state
from services.gateway.operations.store import OperationsUnavailable, PgOperations
from services.retriever_pg.embedded import start_embedded_postgres, stop_embedded_postgres

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]


async def test_a_server_refusing_new_connections_is_unavailable():
    # A server of its own: this test shuts it down. Not under pytest's
    # basetemp (see tests/fixtures/pg.py: the server runs as another user).
    data = Path(tempfile.mkdtemp(prefix="graphmesh-test-pg-ops-")) / "data"
    dsn = await asyncio.to_thread(start_embedded_postgres, data)
    store = PgOperations(dsn)
    holder = await asyncpg.connect(dsn)
    try:
        await store.open()
        assert await store.get("operations/none") is None
        # Smart shutdown: it waits for the open sessions (``holder``) and
        # refuses new connections meanwhile.
        os.kill(int((data / "postmaster.pid").read_text().split()[0]), signal.SIGTERM)
        for _ in range(500):
            try:
                await (await asyncpg.connect(dsn)).close()
            except asyncpg.CannotConnectNowError:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the server never refused a new connection")
        # The store's pooled connection is closed, so its next call connects anew.
        others = "FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database()"
        await holder.execute(f"SELECT pg_terminate_backend(pid) {others}")
        for _ in range(500):
            if not await holder.fetchval(f"SELECT count(*) {others}"):
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # lets asyncpg read the closed socket (a query racing it fails inside asyncpg)
        seen = []
        for _ in range(3):  # the first call may still meet the terminated connection
            with pytest.raises(OperationsUnavailable) as err:
                await store.get("operations/none")
            seen.append(str(err.value))
            if "CannotConnectNowError" in seen[-1]:
                break
        assert "CannotConnectNowError" in seen[-1], seen
        with pytest.raises(OperationsUnavailable):
            await store.heartbeat(["operations/none"], state.utcnow())
    finally:
        await holder.close()
        await store.close()
        await asyncio.to_thread(stop_embedded_postgres, data)
        shutil.rmtree(data.parent, ignore_errors=True)
