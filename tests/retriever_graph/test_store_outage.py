"""GraphStore through a loopback TCP proxy that can cut the connection to
Neo4j, as a stopped or restarting Neo4j does: a query during the outage
fails fast with ServiceUnavailable (mapped to UNAVAILABLE) instead of being
retried by the driver for 30 s, and the store answers again once Neo4j is
back, with no reconnect step. Regression of the fault matrix (issue 16):
with Neo4j stopped, graph requests were held for the driver's whole retry
time and the graph retriever stayed degraded for 11 s after the restart."""
from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest
from neo4j.exceptions import ServiceUnavailable, SessionExpired

from services.retriever_graph.store import GraphStore
from tests.fixtures.proxy import CuttableProxy

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]


async def test_neo4j_outage_fails_fast_and_the_store_recovers_by_itself(neo4j_uri):
    parts = urlsplit(neo4j_uri)
    proxy = CuttableProxy(parts.hostname, parts.port)
    port = await proxy.start()
    store = GraphStore(f"bolt://127.0.0.1:{port}")
    await store.open()
    try:
        await store.count_documents()
        proxy.cut()
        with pytest.raises((ServiceUnavailable, SessionExpired)):
            # The driver's default (30 s of retries) would run into this bound.
            await asyncio.wait_for(store.count_documents(), 15)
        proxy.heal()
        assert await asyncio.wait_for(store.count_documents(), 15) >= 0
    finally:
        await store.close()
        await proxy.close()
