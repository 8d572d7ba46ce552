"""Connection age of internal services (services.common.server): a client
connection is closed after CONNECTION_AGE_MS, and a call in flight then has
the grace to finish: CONNECTION_AGE_GRACE_MS, or the service's longest call
when that is longer (the judge's LLM rounds)."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from services.common import server as server_module
from services.common.server import Service, connection_age_options, create_server
from services.judge.config import JudgeSettings
from services.judge.server import build as build_judge

pytestmark = pytest.mark.asyncio(loop_scope="session")

CALL_S = 1.5


class Slow(reranker_pb2_grpc.RerankerServiceServicer):
    async def Rerank(self, request, context):
        await asyncio.sleep(CALL_S)
        return reranker_pb2.RerankResponse(scorer="slow")


async def call_through_an_aged_connection(longest_call_s: float) -> str:
    service = Service(name="reranker", full_names=["graphmesh.reranker.v1.RerankerService"],
                      register=lambda s: reranker_pb2_grpc.add_RerankerServiceServicer_to_server(Slow(), s),
                      longest_call_s=longest_call_s)
    server, port, _ = await create_server(service)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = await reranker_pb2_grpc.RerankerServiceStub(channel).Rerank(reranker_pb2.RerankRequest(), timeout=30)
            return reply.scorer
    finally:
        await server.stop(0)


@pytest.mark.contract
async def test_a_call_longer_than_the_grace_survives_only_where_the_service_declares_it(monkeypatch):
    # ages scaled down: the connection closes 0.2 s in, the default grace is 0.5 s
    monkeypatch.setattr(server_module, "CONNECTION_AGE_MS", 200)
    monkeypatch.setattr(server_module, "CONNECTION_AGE_GRACE_MS", 500)
    assert await call_through_an_aged_connection(longest_call_s=CALL_S + 1.5) == "slow"
    with pytest.raises(grpc.aio.AioRpcError) as cut:
        await call_through_an_aged_connection(longest_call_s=0.0)
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.unit
async def test_the_judge_declares_its_llm_calls_as_its_longest_call():
    json_rounds, _ = await build_judge(JudgeSettings(llm={"base_url": "http://127.0.0.1:9/v1", "timeout": 300, "rounds": 3, "mode": "json"}))
    yes_no, _ = await build_judge(JudgeSettings(llm={"base_url": "http://127.0.0.1:9/v1", "timeout": 300, "mode": "yes_no"}))
    without, _ = await build_judge(JudgeSettings())
    assert json_rounds.longest_call_s == 900 and without.longest_call_s == 0
    assert yes_no.longest_call_s == 300 * 11  # one call per LLM-judged metric
    assert dict(connection_age_options(900))["grpc.max_connection_age_grace_ms"] == 900_000
    assert dict(connection_age_options(0))["grpc.max_connection_age_grace_ms"] == server_module.CONNECTION_AGE_GRACE_MS
