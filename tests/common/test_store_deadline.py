"""Warm-up before SERVING, and the caller's deadline reaching the stores
(issue 26 item 1), over the real server bootstrap (create_server) with a
fake store behind the one RetrieverService servicer:

- a service with a warm-up is NOT_SERVING, and answers its RPCs
  UNAVAILABLE (reason WARMING_UP), until a warm-up attempt succeeds; failed
  attempts are retried with backoff and never crash it; a bounded number of
  attempts used up leaves it NOT_SERVING;
- each RPC runs in a store deadline scope of the caller's remaining
  deadline less the margin (none without a deadline), and a store's
  StoreTimeout is answered DEADLINE_EXCEEDED, reason STORE_TIMEOUT.
"""
from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common import store_deadline
from services.common.retriever import RetrieverServicer
from services.common.server import Service, WarmUpPolicy, create_server
from services.common.store_deadline import QueryBudget, StoreTimeout, deadline_scope, rpc_budget

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
FAST = WarmUpPolicy(backoff=0.02, max_backoff=0.05, timeout=1.0)


class FakeStore:
    """A store whose first ``failures`` queries raise ConnectionError; it
    records the store budget each query saw."""

    source_by_channel: dict = {}

    def __init__(self, failures: int = 0, hang: bool = False, timeout: bool = False) -> None:
        self.failures = failures
        self.hang = hang
        self.timeout = timeout
        self.calls = 0
        self.budgets: list[float | None] = []

    async def query(self) -> None:
        self.calls += 1
        self.budgets.append(store_deadline.remaining())
        if self.calls <= self.failures:
            raise ConnectionError("store still starting")
        if self.hang:
            await asyncio.sleep(3600)
        if self.timeout:
            raise StoreTimeout("PostgreSQL", store_deadline.remaining(), "canceling statement due to statement timeout")

    async def retrieve(self, request):
        await self.query()
        return [], []


async def start(store: FakeStore, policy: WarmUpPolicy = FAST, warm: bool = True, margin: float | None = 0.05):
    servicer = RetrieverServicer(store, store, 1000)
    service = Service(
        name="fake_retriever",
        full_names=[retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name],
        register=lambda server: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server),
        warm_up=store.query if warm else None,
        store_deadline_margin=margin,
    )
    server, port, _ = await create_server(service, "127.0.0.1", 0, warm_up_policy=policy)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    return service, server, channel


async def health(channel) -> int:
    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    return reply.status


async def retrieve(channel, timeout: float | None = 5.0):
    return await retriever_pb2_grpc.RetrieverServiceStub(channel).Retrieve(
        retriever_pb2.RetrieveRequest(query="q", keywords=["q"]), timeout=timeout)


async def test_not_serving_until_a_warm_up_attempt_succeeds():
    store = FakeStore(failures=3)
    service, server, channel = await start(store, WarmUpPolicy(backoff=0.3, max_backoff=0.3, timeout=1.0))
    try:
        # The first attempt failed: NOT_SERVING, and user RPCs are refused
        # (retryable) instead of reaching the cold store.
        assert await health(channel) == NOT_SERVING
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await retrieve(channel)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "warming up" in refused.value.details()
        assert store.calls == 1  # the refused RPC did not reach the store
        assert await asyncio.wait_for(service.readiness.task, 10) is True
        assert store.calls == 4 and service.readiness.failures == 3
        assert await health(channel) == SERVING
        await retrieve(channel)
    finally:
        await channel.close()
        await server.stop(0)


async def test_a_store_that_answers_at_once_is_serving_when_create_server_returns():
    store = FakeStore()
    service, server, channel = await start(store)
    try:
        assert service.readiness.task.done() and service.readiness.failures == 0
        assert await health(channel) == SERVING
        await retrieve(channel)
    finally:
        await channel.close()
        await server.stop(0)


async def test_bounded_attempts_used_up_leave_it_not_serving_without_crashing():
    store = FakeStore(failures=10**6)
    service, server, channel = await start(store, WarmUpPolicy(attempts=3, backoff=0.01, max_backoff=0.02, timeout=1.0))
    try:
        assert await asyncio.wait_for(service.readiness.task, 10) is False
        assert store.calls == 3
        assert await health(channel) == NOT_SERVING
    finally:
        await channel.close()
        await server.stop(0)


async def test_a_warm_up_that_hangs_counts_as_failed_and_is_retried():
    store = FakeStore(hang=True)
    service, server, channel = await start(store, WarmUpPolicy(attempts=2, backoff=0.01, max_backoff=0.01, timeout=0.1))
    try:
        assert await asyncio.wait_for(service.readiness.task, 10) is False
        assert store.calls == 2
    finally:
        await channel.close()
        await server.stop(0)


async def test_a_service_without_warm_up_is_serving_at_once():
    service, server, channel = await start(FakeStore(), warm=False)
    try:
        assert service.readiness is None
        assert await health(channel) == SERVING
    finally:
        await channel.close()
        await server.stop(0)


async def test_the_callers_remaining_deadline_less_the_margin_reaches_the_store():
    store = FakeStore()
    service, server, channel = await start(store, margin=0.05)
    try:
        await retrieve(channel, timeout=2.0)
        await retrieve(channel, timeout=None)
    finally:
        await channel.close()
        await server.stop(0)
    warm, with_deadline, without = store.budgets
    assert warm is None  # the warm-up runs outside any RPC
    assert 1.5 < with_deadline < 2.0  # the remaining deadline (gRPC rounds it) less the margin
    assert without is None


async def test_a_store_timeout_is_deadline_exceeded_with_a_clear_message():
    store = FakeStore()
    service, server, channel = await start(store)
    store.timeout = True
    try:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await retrieve(channel, timeout=2.0)
    finally:
        await channel.close()
        await server.stop(0)
    assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "PostgreSQL query cancelled after" in failed.value.details()
    assert "remaining deadline" in failed.value.details()


async def test_query_budget_is_the_deadline_at_most_the_ceiling():
    budget = QueryBudget(read_ceiling=3.0, write_ceiling=None)
    assert budget.seconds() == 3.0 and budget.seconds(write=True) is None
    with deadline_scope(1.0):
        assert 0.9 < budget.seconds() <= 1.0
        assert 0.9 < budget.seconds(write=True) <= 1.0
    with deadline_scope(10.0):
        assert budget.seconds() == 3.0
    with deadline_scope(0.0):
        assert budget.seconds() == store_deadline.MIN_SECONDS  # never 0 (= no timeout to the stores)
    assert rpc_budget(None, 0.05) is None
    assert rpc_budget(2.0, 0.05) == pytest.approx(1.95)
    assert rpc_budget(0.1, 0.05) == pytest.approx(0.09)  # at most a tenth
    assert store_deadline.milliseconds(0.0001) == 1 and store_deadline.milliseconds(0.25) == 250
