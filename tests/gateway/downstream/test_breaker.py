"""The circuit breaker (services/gateway/downstream/breaker.py) on a fake clock, alone
and wrapped around fake clients inside the gateway's use cases: a dead
service stops being called (stage DEGRADED "circuit open", no timeout paid),
one probe after the cool-down, closed again when the service is back."""
from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2

from graphmesh.common.v1 import types_pb2
from services.common.errors import DownstreamError
from services.common.llm import LlmError
from services.gateway.downstream.breaker import CLOSED, HALF_OPEN, OPEN, BreakerClient, BreakerConfig, CircuitBreaker
from services.gateway.config import GatewaySettings
from services.gateway.downstream.guard import Deadline
from services.gateway.server import use_cases
from tests.fakes import FakeExpander, FakeFuser, FakeLlm, FakeReranker, FakeRetriever, candidate

pytestmark = pytest.mark.unit

DEGRADED = types_pb2.STAGE_STATUS_DEGRADED
ARTICLE = candidate("5689", "用人单位应当向劳动者每月支付二倍的工资。", "pg.keyword", 9.0, vector_score=0.8)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def breaker(clock: Clock, **config) -> CircuitBreaker:
    return CircuitBreaker("svc", BreakerConfig(**{"failures": 3, "cool_down": 2.0, **config}), clock=clock)


def test_opens_after_consecutive_failures_and_refuses_until_the_cool_down():
    clock = Clock()
    b = breaker(clock)
    for _ in range(2):
        assert b.allow()
        b.record_failure()
    assert b.state == CLOSED
    b.allow()
    b.record_failure()
    assert b.state == OPEN and not b.allow()
    clock.now += 1.9
    assert not b.allow()
    clock.now += 0.1
    assert b.state == HALF_OPEN


def test_a_success_resets_the_consecutive_count():
    b = breaker(Clock())
    for _ in range(5):
        b.record_failure()
        b.record_failure()
        b.record_success()
    assert b.state == CLOSED


def test_failure_rate_over_the_window_opens_it():
    b = breaker(Clock(), failures=100, failure_rate=0.5, window=10, min_calls=10)
    for i in range(9):
        b.record_failure() if i % 2 else b.record_success()
    assert b.state == CLOSED  # 9 known calls: below min_calls
    b.record_failure()  # 5 of 10 failed
    assert b.state == OPEN


def test_half_open_lets_exactly_one_probe_through():
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    clock.now += 2.0
    assert b.allow() and not b.allow() and not b.allow()
    b.record_success()
    assert b.state == CLOSED and b.allow() and b.allow()


def test_a_probe_that_hangs_lets_another_through_after_a_cool_down():
    # Regression (fault matrix, "LLM hangs"): a probe stuck on the hung
    # service held the circuit open for its whole timeout after the service
    # was healthy again.
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    clock.now += 2.0
    assert b.allow()
    clock.now += 1.9
    assert not b.allow()
    clock.now += 0.1
    assert b.allow() and not b.allow()
    b.record_success()
    assert b.state == CLOSED


def test_a_failed_probe_opens_it_for_another_cool_down():
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    clock.now += 2.0
    assert b.allow()
    b.record_failure()
    assert b.state == OPEN and not b.allow()
    clock.now += 1.0
    assert not b.allow()
    clock.now += 1.0
    assert b.allow()


def test_a_cancelled_probe_frees_the_slot():
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    clock.now += 2.0
    assert b.allow() and not b.allow()
    b.release()
    assert b.allow()


# ---------------------------------------------------------------- wrapped clients

pytestmark_async = pytest.mark.asyncio(loop_scope="session")


def gateway(graph, clock: Clock, llm=None, floor: float = 1.0):
    # abstention off: the fakes' evidence would be judged insufficient and
    # the LLM never asked (issue 12)
    settings = GatewaySettings(port=0, rest={"port": -1},
                               deadlines={"retrieve": 0.3, "rerank": 0.3, "fuse": 0.3, "expand": 0.3},
                               abstention={"enabled": False})
    config = BreakerConfig(failures=3, cool_down=2.0, slow_call_floor=floor)
    wrapped_graph = BreakerClient(graph, CircuitBreaker(graph.name, config, clock=clock))
    wrapped_llm = BreakerClient(llm or FakeLlm(), CircuitBreaker("llm", config, clock=clock), llm=True)
    return use_cases(settings, FakeExpander(), [FakeRetriever("retriever_pg", [ARTICLE]), wrapped_graph],
                     FakeReranker(), FakeFuser(), wrapped_llm), wrapped_graph


def graph_stage(response) -> types_pb2.StageTiming:
    return next(t for t in response.timings if t.stage == "retrieve.graph")


@pytestmark_async
async def test_a_dead_retriever_is_not_called_while_its_circuit_is_open_then_probed_and_closed():
    clock = Clock()
    graph = FakeRetriever("retriever_graph", fail=grpc.StatusCode.UNAVAILABLE)
    use, wrapped = gateway(graph, clock)
    for _ in range(3):
        reply = (await use.search.search("工资", 5, None, Deadline(5))).response
        assert graph_stage(reply).detail.startswith("UNAVAILABLE: unavailable in fake")
    assert wrapped.breaker.state == OPEN and len(graph.calls) == 3

    reply = (await use.search.search("工资", 5, None, Deadline(5))).response
    assert len(graph.calls) == 3  # refused without calling the service
    stage = graph_stage(reply)
    assert stage.status == DEGRADED and "circuit open" in stage.detail
    assert list(reply.degraded) == ["retriever_graph"]
    assert [c.document_id for c in reply.results] == ["5689"]  # partial result, with the reason above

    graph.fail = None  # the service is back
    clock.now += 2.0
    reply = (await use.search.search("工资", 5, None, Deadline(5))).response
    assert len(graph.calls) == 4 and wrapped.breaker.state == CLOSED and not reply.degraded


@pytestmark_async
async def test_invalid_argument_does_not_count_against_the_service():
    clock = Clock()
    graph = FakeRetriever("retriever_graph", fail=grpc.StatusCode.INVALID_ARGUMENT)
    use, wrapped = gateway(graph, clock)
    for _ in range(5):
        with pytest.raises(DownstreamError):
            await use.search.search("工资", 5, None, Deadline(5))
    assert wrapped.breaker.state == CLOSED and len(graph.calls) == 5


@pytestmark_async
async def test_timeouts_count_only_when_the_call_had_time_enough():
    clock = Clock()
    graph = FakeRetriever("retriever_graph", fail="hang")
    use, wrapped = gateway(graph, clock, floor=1.0)  # the stage cap is 0.3 s: the caller's budget, not the service
    for _ in range(4):
        await use.search.search("工资", 5, None, Deadline(5))
    assert wrapped.breaker.state == CLOSED and len(graph.calls) == 4

    graph2 = FakeRetriever("retriever_graph", fail="hang")
    use2, wrapped2 = gateway(graph2, clock, floor=0.1)
    for _ in range(4):
        reply = (await use2.search.search("工资", 5, None, Deadline(5))).response
    assert wrapped2.breaker.state == OPEN and len(graph2.calls) == 3
    assert "circuit open" in graph_stage(reply).detail


class CountingLlm(FakeLlm):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.calls = 0

    async def stream(self, messages, max_tokens, timeout=None, purpose="answer", extra=None):
        self.calls += 1
        async for piece in super().stream(messages, max_tokens, timeout, purpose):
            yield piece


@pytestmark_async
async def test_a_failing_llm_is_skipped_while_open_and_answers_stay_extractive():
    clock = Clock()
    llm = CountingLlm(enabled=True, answer="根据[1]，应支付二倍工资。", fail_reason="server_error")
    use, _ = gateway(FakeRetriever("retriever_graph"), clock, llm=llm)
    for _ in range(3):
        reply = await use.answerer.answer("工资", 5, None, Deadline(5))
        assert "llm" in reply.search.degraded
    reply = await use.answerer.answer("工资", 5, None, Deadline(5))
    assert llm.calls == 3
    generate = next(t for t in reply.search.timings if t.stage == "generate")
    assert generate.status == DEGRADED and generate.detail == "circuit_open"
    assert reply.answer  # extractive answer, not a failure

    llm.fail_reason = ""
    clock.now += 2.0
    reply = await use.answerer.answer("工资", 5, None, Deadline(5))
    assert llm.calls == 4 and "llm" not in reply.search.degraded


def test_refusal_errors_carry_a_stable_reason():
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    client = BreakerClient(FakeRetriever("retriever_graph"), b)
    llm = BreakerClient(FakeLlm(enabled=True), b, llm=True)
    assert client.name == "retriever_graph" and llm.enabled
    err = client._refusal()
    assert isinstance(err, DownstreamError) and err.code == grpc.StatusCode.UNAVAILABLE
    info = error_details_pb2.ErrorInfo()
    assert err.status.details[0].Unpack(info) and info.reason == "CIRCUIT_OPEN"
    assert isinstance(llm._refusal(), LlmError) and llm._refusal().reason == "circuit_open"
