"""JudgeService over gRPC (a real grpc.aio server on port 0): the metric set,
NOT_COMPUTED without an LLM, a failing LLM endpoint, and INVALID_ARGUMENT
with a BadRequest naming the field."""
from __future__ import annotations

import socket

import grpc
import pytest
import pytest_asyncio

from graphmesh.common.v1 import types_pb2
from graphmesh.judge.v1 import judge_pb2, judge_pb2_grpc
from services.common.errors import field_violations
from services.common.server import create_server
from services.judge.config import JudgeSettings
from services.judge.server import build
from services.judge.servicer import JudgeServicer

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]
NOT_COMPUTED = judge_pb2.SCORE_METHOD_NOT_COMPUTED


async def _serve(settings: JudgeSettings):
    service, _ = await build(settings)
    server, port, _ = await create_server(service, "127.0.0.1", 0)
    return server, grpc.aio.insecure_channel(f"127.0.0.1:{port}")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def judge():
    server, ch = await _serve(JudgeSettings(port=0))
    yield judge_pb2_grpc.JudgeServiceStub(ch)
    await ch.close()
    await server.stop(0)


def _request(**kwargs) -> judge_pb2.JudgeRequest:
    base = dict(
        question="什么是实用新型？",
        answer="实用新型是对产品的形状、构造提出的新的技术方案[1]。",
        ranked_ids=["d1", "d2", "d3"],
        contexts=["实用新型，是指对产品的形状、构造或者其结合所提出的适于实用的新的技术方案。", "发明，是指新的技术方案。"],
        context_ids=["d1", "d2"],
        gold_ids=["d1"],
        timings=[types_pb2.StageTiming(stage="expand", duration_ms=150), types_pb2.StageTiming(stage="total", duration_ms=6000)],
    )
    base.update(kwargs)
    return judge_pb2.JudgeRequest(**base)


async def test_judge_returns_every_group_and_overall(judge):
    reply = await judge.Judge(_request(), timeout=30)
    metrics = {m.name: m for m in reply.metrics}
    assert len(metrics) == 31 and not reply.llm_configured
    assert metrics["mrr@10"].value == 1.0 and metrics["mrr@10"].method == judge_pb2.SCORE_METHOD_RULE
    assert metrics["citation_f1"].value == 1.0
    assert metrics["latency_norm.expand"].value == 1.0 and metrics["end_to_end_norm"].value == 0.5
    for name in ("cot_quality", "reasoning_depth"):
        assert metrics[name].method == NOT_COMPUTED and "LLM" in metrics[name].detail
    groups = {g.group: g for g in reply.groups}
    assert groups[judge_pb2.METRIC_GROUP_REASONING].computed == 0
    assert groups[judge_pb2.METRIC_GROUP_RETRIEVAL].weight == pytest.approx(0.40)
    a, b = groups[judge_pb2.METRIC_GROUP_RETRIEVAL].value, groups[judge_pb2.METRIC_GROUP_ANSWER].value
    assert reply.overall.value == pytest.approx((0.40 * a + 0.35 * b) / 0.75)


@pytest.mark.parametrize("kwargs, field", [
    ({"question": "  "}, "question"),
    ({"k": 1000}, "k"),
    ({"context_ids": ["d1"]}, "context_ids"),
    ({"reference_answer": "字" * 20001}, "reference_answer"),
    ({"domain_packs": ["law_zh", "no_such_pack"]}, "domain_packs"),
])
async def test_bad_input_is_invalid_argument_naming_the_field(judge, kwargs, field):
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await judge.Judge(_request(**kwargs), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(info.value)] == [field]


@pytest.mark.parametrize("mode, failed", [("yes_no", "failed in 1 of 1 rounds"), ("json", "failed in 3 of 3 rounds")])
async def test_unreachable_llm_judge_leaves_llm_metrics_not_computed(mode, failed):
    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = JudgeSettings(port=0, llm={"base_url": f"http://127.0.0.1:{port}/v1", "model": "none", "timeout": 2, "mode": mode})
    server, ch = await _serve(settings)
    try:
        reply = await judge_pb2_grpc.JudgeServiceStub(ch).Judge(_request(), timeout=60)
    finally:
        await ch.close()
        await server.stop(0)
    metrics = {m.name: m for m in reply.metrics}
    assert reply.llm_configured
    assert metrics["cot_quality"].method == NOT_COMPUTED and failed in metrics["cot_quality"].detail
    # the rule part still stands, reported as a rule score
    assert metrics["faithfulness"].method == judge_pb2.SCORE_METHOD_RULE


class RecordingLlm:
    """Our LlmClient's interface: records the sampling seed of each JSON
    round and scores every metric by it."""

    enabled = True

    def __init__(self) -> None:
        self.seeds: list[int | None] = []

    async def complete(self, messages, max_tokens, timeout=None, purpose="answer", extra=None):
        seed = (extra or {}).get("seed")
        self.seeds.append(seed)
        return '{"cot_quality": %s, "hallucination": 0.0}' % (seed / 10)

    async def close(self) -> None:
        pass


async def test_json_rounds_are_sampled_with_a_seed_each_and_their_median_taken():
    servicer = JudgeServicer(JudgeSettings(port=0, llm={"base_url": "http://127.0.0.1:9/v1", "mode": "json", "rounds": 3}))
    servicer._llm = fake = RecordingLlm()
    reply = await servicer.Judge(_request(), context=None)
    metrics = {m.name: m for m in reply.metrics}
    assert fake.seeds == [1, 2, 3]  # one seed per round: a llama.cpp server samples unseeded rounds alike
    assert list(metrics["cot_quality"].llm_rounds) == pytest.approx([0.1, 0.2, 0.3])
    assert metrics["cot_quality"].value == pytest.approx(0.2) and "median of 3 LLM rounds" in metrics["cot_quality"].detail
    assert metrics["hallucination"].llm_value == pytest.approx(1.0)  # "how much hallucination: 0" is the best score


async def test_yes_no_judge_with_the_local_llm_tells_an_off_topic_answer_apart(local_llm):
    server, ch = await _serve(JudgeSettings(port=0, llm={"base_url": local_llm, "timeout": 120, "mode": "yes_no"}))
    try:
        stub = judge_pb2_grpc.JudgeServiceStub(ch)
        real = {m.name: m for m in (await stub.Judge(_request(), timeout=300)).metrics}
        off_topic = {m.name: m for m in (await stub.Judge(_request(answer="今天天气很好，适合出门散步。"), timeout=300)).metrics}
    finally:
        await ch.close()
        await server.stop(0)
    for name in ("faithfulness", "hallucination", "relevancy", "cot_quality"):
        assert real[name].HasField("llm_value") and 0.0 <= real[name].llm_value <= 1.0
        assert len(real[name].llm_rounds) == 1 and "yes-probability" in real[name].detail
    assert real["relevancy"].llm_value > off_topic["relevancy"].llm_value
