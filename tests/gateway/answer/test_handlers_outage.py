"""Answer when every retriever is down: UNAVAILABLE naming them, like
Search, not an OK answer saying nothing was found. Regression of the fault
matrix (issue 16): with retriever_pg killed and the graph retriever's
circuit open, Answer replied "未检索到相关资料。" with no strategy and an empty
``degraded`` list. When the retrievers answer but find nothing, the
no-evidence answer stays."""
from __future__ import annotations

import grpc
import pytest

from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import DownstreamError
from services.gateway.config import GatewaySettings
from services.gateway.downstream.guard import Deadline
from services.gateway.server import use_cases
from tests.fakes import FakeExpander, FakeFuser, FakeLlm, FakeReranker, FakeRetriever

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]


def use(pg_fail, graph_fail):
    settings = GatewaySettings(port=0, rest={"port": -1}, deadlines={"retrieve": 0.3})
    return use_cases(settings, FakeExpander(), [FakeRetriever("retriever_pg", fail=pg_fail),
                                                FakeRetriever("retriever_graph", fail=graph_fail)],
                     FakeReranker(), FakeFuser(), FakeLlm())


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED])
async def test_answer_with_every_retriever_down_fails_like_search(code):
    with pytest.raises(DownstreamError) as err:
        await use(code, code).answerer.answer("工资", 5, None, Deadline(5))
    assert err.value.code == code and "retriever_pg" in str(err.value)


async def test_stream_with_every_retriever_down_ends_with_the_error():
    events = []
    with pytest.raises(DownstreamError) as err:
        async for event in use(grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE).answerer.events("工资", 5, None, Deadline(5)):
            events.append(event)
    assert err.value.code == grpc.StatusCode.UNAVAILABLE
    assert events  # the strategies' stage events came first


async def test_retrievers_that_answer_with_nothing_still_give_the_no_evidence_answer():
    # Retrievers that answer are no outage: an OK reply, which since issue
    # 12's abstention says the evidence is insufficient (abstained).
    reply = await use(None, None).answerer.answer("工资", 5, None, Deadline(5))
    assert reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED
    # nothing was ingested (the fakes store no collection): the answer says so first
    assert reply.answer.startswith("检索范围内没有可用的资料，无法回答这个问题（所选的资料集合不存在或为空")
    assert reply.attempts  # the strategies ran and answered, unlike the outage case


async def test_without_abstention_the_no_evidence_answer_stays():
    settings = GatewaySettings(port=0, rest={"port": -1}, deadlines={"retrieve": 0.3}, abstention={"enabled": False})
    use_ = use_cases(settings, FakeExpander(), [FakeRetriever("retriever_pg"), FakeRetriever("retriever_graph")],
                     FakeReranker(), FakeFuser(), FakeLlm())
    reply = await use_.answerer.answer("工资", 5, None, Deadline(5))
    assert reply.mode != gateway_pb2.ANSWER_MODE_ABSTAINED and reply.answer == "未检索到相关资料。"


async def test_an_answer_whose_every_strategy_ran_out_of_time_is_deadline_exceeded_not_an_abstention():
    """A trial's Answer with a 20 ms deadline came back OK, abstained, saying the knowledge base may not hold
    the answer; only attempts[0].reason said "timed out"."""
    settings = GatewaySettings(port=0, rest={"port": -1})
    use_ = use_cases(settings, FakeExpander(fail="hang"), [FakeRetriever("retriever_pg", fail="hang"),
                                                           FakeRetriever("retriever_graph", fail="hang")],
                     FakeReranker(), FakeFuser(), FakeLlm())
    with pytest.raises(DownstreamError) as err:
        await use_.answerer.answer("北斗会议室在几楼", 5, None, Deadline(0.2))
    assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED and "deadline" in str(err.value)


async def test_answer_with_the_document_store_down_and_the_graph_finding_nothing_is_unavailable():
    """A trial killed retriever_pg: Answer said 检索到的资料不足以回答这个问题，知识库中可能没有相关内容 (HTTP 200),
    though the documents were never searched."""
    with pytest.raises(DownstreamError) as err:
        await use(grpc.StatusCode.UNAVAILABLE, None).answerer.answer("借档案最长能借多少天", 5, None, Deadline(5))
    assert err.value.code == grpc.StatusCode.UNAVAILABLE and "retriever_pg" in str(err.value)
