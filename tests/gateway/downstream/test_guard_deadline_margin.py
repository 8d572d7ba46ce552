"""A stage that uses up the caller's whole deadline (a slow reranker whose
cap is longer than the deadline, a hung LLM) still gets the caller a
degraded answer, not DEADLINE_EXCEEDED: the gateway keeps a margin of the
caller's deadline for answering. Regression of the fault matrix (issue 16,
"reranker slow" and "LLM hangs": the first requests failed with
DEADLINE_EXCEEDED)."""
from __future__ import annotations

import grpc
import pytest

from graphmesh.gateway.v1 import gateway_pb2
from tests.fakes import FakeReranker

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def test_a_hung_reranker_degrades_search_within_the_callers_deadline(fake_gateway):
    gw = await fake_gateway(reranker=FakeReranker(fail="hang"), deadlines={"rerank": 60.0}, breaker={"enabled": False})
    reply = await gw.stub.Search(gateway_pb2.SearchRequest(query="工资", top_k=3, rerank=True), timeout=3)
    assert "reranker" in reply.degraded
    assert [r.document_id for r in reply.results] == ["1"]


async def test_without_a_margin_the_caller_sees_deadline_exceeded(fake_gateway):
    # The same request with the margin switched off: proves the test above
    # depends on it.
    gw = await fake_gateway(reranker=FakeReranker(fail="hang"), deadlines={"rerank": 60.0, "margin": 0.0},
                            breaker={"enabled": False})
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await gw.stub.Search(gateway_pb2.SearchRequest(query="工资", top_k=3, rerank=True), timeout=3)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
