"""The caller's remaining deadline reaches both stores (issue 26 item 1),
against the real PostgreSQL and Neo4j of the test session:

- a slow statement (``SELECT pg_sleep(5)``) / a long Cypher query run
  through the stores' own connection path under a tiny deadline ends within
  about the deadline with StoreTimeout, and the store itself has cancelled
  it (it is no longer in pg_stat_activity / SHOW TRANSACTIONS);
- through the servicer (the real server bootstrap, a backend whose store
  query is the slow one), the RPC answers DEADLINE_EXCEEDED, from the store's
  bound when that is the smaller one ("... query cancelled after ...") and
  within about the caller's deadline when that is;
- the PostgreSQL pool replaces connections that died with the server
  (terminated backends) without failing the next query.
"""
from __future__ import annotations

import asyncio
import time

import asyncpg
import grpc
import pytest

from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.retriever import RetrieverServicer
from services.common.server import Service, create_server
from services.common.store_deadline import QueryBudget, StoreTimeout, deadline_scope
from services.retriever_graph.store import GraphStore
from services.retriever_pg.store import PgStore

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]

#: Far more work than any deadline here: 10^10 rows.
SLOW_CYPHER = ("UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b "
               "WITH a, b WHERE (a * b) % 7 = 3 RETURN count(*) AS n")
#: Neo4j checks transaction timeouts periodically
#: (db.transaction.monitor.check.interval, 2 s by default), so it may stop a
#: transaction up to that long after its timeout.
NEO4J_CHECK_INTERVAL = 2.0


async def _pg_sleepers(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(5)%'")
    finally:
        await conn.close()


async def _neo4j_running(store: GraphStore) -> int:
    records = await store.driver.execute_query(
        "SHOW TRANSACTIONS YIELD currentQuery, status WHERE currentQuery CONTAINS 'range(1, 100000) AS a' "
        "AND NOT currentQuery CONTAINS 'SHOW TRANSACTIONS' RETURN count(*) AS n", database_=store.database)
    return int(records.records[0]["n"])


class SlowBackend:
    """A RetrievalBackend whose retrieve runs ``slow()`` (a store query)."""

    source_by_channel: dict = {}

    def __init__(self, slow) -> None:
        self.slow = slow

    async def retrieve(self, request):
        await self.slow()
        return [], []


async def _serve(backend, margin: float = 0.05):
    servicer = RetrieverServicer(backend, backend, 1000)
    service = Service(
        name="slow_retriever",
        full_names=[retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name],
        register=lambda server: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server),
        store_deadline_margin=margin,
    )
    server, port, _ = await create_server(service, "127.0.0.1", 0)
    return server, grpc.aio.insecure_channel(f"127.0.0.1:{port}")


async def _retrieve(channel, timeout: float) -> tuple[grpc.aio.AioRpcError, float]:
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await retriever_pb2_grpc.RetrieverServiceStub(channel).Retrieve(
            retriever_pb2.RetrieveRequest(query="q", keywords=["q"]), timeout=timeout)
    return failed.value, time.monotonic() - started


# ---------------------------------------------------------------- PostgreSQL


async def _pg_store(dsn: str, ceiling: float = 30.0, pool_max: int = 8) -> PgStore:
    store = PgStore(dsn, 8, budget=QueryBudget(read_ceiling=ceiling), pool_min=1, pool_max=pool_max)
    await store.open()
    await store.migrate()
    return store


async def test_pg_statement_is_cancelled_by_the_server_at_the_deadline(pg_new_database):
    pg_dsn = await pg_new_database()
    store = await _pg_store(pg_dsn, pool_max=1)  # one connection: the next use gets the same one
    try:
        started = time.monotonic()
        with deadline_scope(0.3), pytest.raises(StoreTimeout) as timed_out:
            async with store.connection() as conn:
                await conn.execute("SELECT pg_sleep(5)")
        elapsed = time.monotonic() - started
        print(f"pg_sleep(5) under a 0.3 s deadline ended after {elapsed:.3f} s")
        assert 0.25 < elapsed < 1.5, elapsed
        # The bound is what was left of the 0.3 s deadline when the statement
        # started (0.299 s on a busy machine), and the message names it.
        assert timed_out.value.store == "PostgreSQL"
        assert 0.2 < timed_out.value.seconds <= 0.3, timed_out.value.seconds
        assert f"cancelled after {timed_out.value.seconds:.3f} s" in str(timed_out.value)
        assert isinstance(timed_out.value.__cause__, asyncpg.QueryCanceledError)  # the server's own cancel
        assert await _pg_sleepers(pg_dsn) == 0
        # The connection went back to the pool reset (RESET ALL): a use
        # without a bound finds no timeout left on it.
        async with store.connection(write=True) as conn:
            assert await conn.fetchval("SHOW statement_timeout") == "0"
    finally:
        await store.close()


async def test_pg_read_ceiling_applies_without_a_deadline_and_writes_have_none(pg_new_database):
    pg_dsn = await pg_new_database()
    store = await _pg_store(pg_dsn, ceiling=0.3)
    try:
        with pytest.raises(StoreTimeout):
            async with store.connection() as conn:
                await conn.execute("SELECT pg_sleep(5)")
        async with store.connection(write=True) as conn:
            assert await conn.fetchval("SHOW statement_timeout") == "0"
        with deadline_scope(2.0):
            async with store.connection(write=True) as conn:
                shown = await conn.fetchval("SHOW statement_timeout")
        assert shown == "2s" or (shown.endswith("ms") and 1900 <= int(shown[:-2]) <= 2000), shown
    finally:
        await store.close()


async def test_pg_servicer_answers_deadline_exceeded_from_the_store_bound(pg_new_database):
    pg_dsn = await pg_new_database()
    store = await _pg_store(pg_dsn, ceiling=0.5)

    async def slow():
        async with store.connection() as conn:
            await conn.execute("SELECT pg_sleep(5)")

    server, channel = await _serve(SlowBackend(slow))
    try:
        # The store's bound (0.5 s) is below the caller's (5 s): the service
        # answers DEADLINE_EXCEEDED itself, naming the store.
        err, elapsed = await _retrieve(channel, 5.0)
        print(f"pg servicer, 0.5 s ceiling, 5 s deadline: {err.code().name} after {elapsed:.3f} s: {err.details()}")
        assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "PostgreSQL query cancelled after 0.5" in err.details()
        assert elapsed < 2.0, elapsed
        # A tiny caller deadline: the statement ends with it, server-side.
        store.budget = QueryBudget(read_ceiling=30.0)
        err, elapsed = await _retrieve(channel, 0.4)
        print(f"pg servicer, 0.4 s deadline: {err.code().name} after {elapsed:.3f} s: {err.details()}")
        assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert elapsed < 1.5, elapsed
        await asyncio.sleep(0.3)
        assert await _pg_sleepers(pg_dsn) == 0
    finally:
        await channel.close()
        await server.stop(0)
        await store.close()


async def test_pg_pool_replaces_connections_that_died_with_the_server(pg_new_database):
    pg_dsn = await pg_new_database()
    store = PgStore(pg_dsn, 8, pool_min=3, pool_max=3)
    await store.open()
    try:
        async def backend_pid():
            async with store.connection() as conn:
                await asyncio.sleep(0.05)  # hold it, so three distinct connections are opened
                return await conn.fetchval("SELECT pg_backend_pid()")

        pids = set(await asyncio.gather(*(backend_pid() for _ in range(3))))
        admin = await asyncpg.connect(pg_dsn)
        try:
            # What a server restart does to pooled connections.
            await admin.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS p(pid)", list(pids))
        finally:
            await admin.close()
        await asyncio.sleep(0.1)
        # Every next query succeeds: no request sees a dead connection.
        new = set(await asyncio.gather(*(backend_pid() for _ in range(3))))
        assert not new & pids
    finally:
        await store.close()


# ---------------------------------------------------------------- Neo4j


async def test_neo4j_transaction_is_terminated_at_the_deadline(graph_store):
    started = time.monotonic()
    with deadline_scope(0.3), pytest.raises(StoreTimeout) as timed_out:
        await graph_store._query(SLOW_CYPHER)
    elapsed = time.monotonic() - started
    print(f"10^10-row Cypher under a 0.3 s deadline ended after {elapsed:.3f} s")
    assert 0.25 < elapsed < 0.3 + NEO4J_CHECK_INTERVAL + 1.0, elapsed
    assert timed_out.value.store == "Neo4j"
    assert 0.2 < timed_out.value.seconds <= 0.3, timed_out.value.seconds
    assert f"cancelled after {timed_out.value.seconds:.3f} s" in str(timed_out.value)
    assert await _neo4j_running(graph_store) == 0
    assert await graph_store.count_documents() == 0  # the store answers normally after


async def test_neo4j_servicer_answers_deadline_exceeded(graph_store):
    async def slow():
        await graph_store._query(SLOW_CYPHER)

    server, channel = await _serve(SlowBackend(slow))
    try:
        graph_store.budget = QueryBudget(read_ceiling=0.5)
        err, elapsed = await _retrieve(channel, 10.0)
        print(f"neo4j servicer, 0.5 s ceiling, 10 s deadline: {err.code().name} after {elapsed:.3f} s: {err.details()}")
        assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "Neo4j query cancelled after 0.5" in err.details()
        assert elapsed < 0.5 + NEO4J_CHECK_INTERVAL + 1.0, elapsed
        graph_store.budget = QueryBudget(read_ceiling=30.0)
        err, elapsed = await _retrieve(channel, 0.5)
        print(f"neo4j servicer, 0.5 s deadline: {err.code().name} after {elapsed:.3f} s: {err.details()}")
        assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert elapsed < 1.5, elapsed  # the caller's own deadline
        # and Neo4j stopped the transaction itself soon after.
        await asyncio.sleep(NEO4J_CHECK_INTERVAL + 0.5)
        assert await _neo4j_running(graph_store) == 0
    finally:
        await channel.close()
        await server.stop(0)
