"""RerankerService over gRPC (real grpc.aio servers on port 0).

With a small fake scorer of our own Scorer interface: concurrent calls are
coalesced (asserted on graphmesh_reranker_batch_size), results come best
first, a full queue answers RESOURCE_EXHAUSTED, no scorer answers
FAILED_PRECONDITION, too many passages INVALID_ARGUMENT.
With real backends: the cross-encoder from `graphmesh reranker train` on
m3e-small (round trip; an over-long passage is cut and counted), the
bi-encoder against a real expander, the llm scorer against the local
llama.cpp server.
"""
from __future__ import annotations

import asyncio

import grpc
import pytest
from prometheus_client import REGISTRY

from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from services.common.errors import field_violations
from services.common.server import create_server
from services.common.settings import MeshAddresses
from services.reranker.config import RerankerSettings
from services.reranker.scorer import Prepared
from services.reranker.server import build

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


class FakeScorer:
    """Score = share of the query's characters found in the passage; can be held."""

    name = "fake"
    padded = True
    model = "fake-model"
    device = "cpu"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()

    async def prepare(self, query, passages):
        return Prepared(query, list(passages), [len(query) + len(p) for p in passages], 0)

    async def score(self, pairs):
        await self.gate.wait()
        return [sum(ch in p for ch in q) / len(q) for q, p in pairs]

    async def close(self):
        pass


class Serving:
    def __init__(self, settings: RerankerSettings, scorer=None, addresses=None) -> None:
        self.settings, self.scorer, self.addresses = settings, scorer, addresses

    async def __aenter__(self) -> reranker_pb2_grpc.RerankerServiceStub:
        self.service, _ = await build(self.settings, self.addresses, scorer=self.scorer)
        self.server, port, _ = await create_server(self.service, "127.0.0.1", 0)
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        return reranker_pb2_grpc.RerankerServiceStub(self.channel)

    async def __aexit__(self, *exc) -> None:
        await self.channel.close()
        await self.server.stop(0)
        await self.service.on_stop()


def request(query: str, texts: list[str]) -> reranker_pb2.RerankRequest:
    return reranker_pb2.RerankRequest(query=query, passages=[reranker_pb2.Passage(id=f"p{i}", text=t) for i, t in enumerate(texts)])


async def test_concurrent_calls_are_coalesced_and_results_ordered_by_score():
    settings = RerankerSettings(port=0, max_wait_ms=300, max_batch_tokens=100_000)
    before_batches = sample("graphmesh_reranker_batch_size_count")
    before_pairs = sample("graphmesh_reranker_batch_size_sum")
    before_total = sample("graphmesh_reranker_pairs_total")
    async with Serving(settings, FakeScorer()) as stub:
        replies = await asyncio.gather(*(
            stub.Rerank(request("专利期限", ["无关文字", "专利的期限", "专利"]), timeout=10) for _ in range(6)
        ))
    assert sample("graphmesh_reranker_batch_size_sum") - before_pairs == 18
    assert sample("graphmesh_reranker_pairs_total") - before_total == 18
    assert sample("graphmesh_reranker_batch_size_count") - before_batches < 6  # coalesced
    for reply in replies:
        assert [s.id for s in reply.scores] == ["p1", "p2", "p0"]
        assert [s.score for s in reply.scores] == sorted((s.score for s in reply.scores), reverse=True)
        assert reply.scorer == "fake" and reply.model == "fake-model" and reply.truncated_passages == 0


async def test_full_queue_answers_resource_exhausted():
    scorer = FakeScorer()
    scorer.gate.clear()
    settings = RerankerSettings(port=0, max_wait_ms=0, max_batch_pairs=2, queue_size=4, max_passages=4)
    async with Serving(settings, scorer) as stub:
        held = asyncio.ensure_future(stub.Rerank(request("q", ["a", "b"]), timeout=10))  # in the held batch
        await asyncio.sleep(0.2)
        queued = asyncio.ensure_future(stub.Rerank(request("q", ["c", "d", "e"]), timeout=10))
        await asyncio.sleep(0.2)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Rerank(request("q", ["f", "g"]), timeout=10)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        scorer.gate.set()
        assert len((await held).scores) == 2 and len((await queued).scores) == 3


async def test_no_scorer_is_failed_precondition_and_too_many_passages_invalid():
    async with Serving(RerankerSettings(port=0, model_dir="")) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Rerank(request("q", ["a"]), timeout=10)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    async with Serving(RerankerSettings(port=0, max_passages=2), FakeScorer()) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Rerank(request("q", ["a", "b", "c"]), timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [f for f, _ in field_violations(info.value)] == ["passages"]


@pytest.mark.parametrize("runtime", ["onnx", "torch"])
async def test_trained_cross_encoder_round_trips_and_cuts_long_passages(tiny_cross_encoder, runtime):
    card = (tiny_cross_encoder / "training_card.json").read_text(encoding="utf-8")
    assert '"steps": 3' in card and "bm25" in card
    settings = RerankerSettings(port=0, model_dir=str(tiny_cross_encoder), device="cpu", max_length=64, runtime=runtime)
    before = sample("graphmesh_reranker_truncated_total")
    long = "中华人民共和国专利法 第四十二条\n" + "发明专利权的期限为二十年，实用新型专利权的期限为十年。" * 8
    async with Serving(settings) as stub:
        reply = await stub.Rerank(request("专利权的期限是多久？", [long, "商标注册人享有商标专用权。", "专利"]), timeout=120)
    assert reply.scorer == "cross-encoder" and reply.model == str(tiny_cross_encoder) and reply.device == "cpu"
    assert reply.truncated_passages == 1
    assert sample("graphmesh_reranker_truncated_total") - before == 1
    assert sorted(s.id for s in reply.scores) == ["p0", "p1", "p2"]
    assert all(0.0 <= s.score <= 1.0 for s in reply.scores)
    assert [s.score for s in reply.scores] == sorted((s.score for s in reply.scores), reverse=True)


async def test_bi_encoder_scores_through_a_real_expander(tmp_path):
    from tests.fixtures.expander import serving_expander

    async with serving_expander(tmp_path) as expander_addr:
        addresses = MeshAddresses(expander_addr=expander_addr)
        async with Serving(RerankerSettings(port=0, scorer="bi-encoder"), addresses=addresses) as stub:
            reply = await stub.Rerank(request("专利权的保护期限", ["天气预报说明天下雨。", "发明专利权的期限为二十年。"]), timeout=60)
    assert reply.scorer == "bi-encoder" and reply.device == "remote" and reply.model
    assert [s.id for s in reply.scores] == ["p1", "p0"]
    assert all(0.0 <= s.score <= 1.0 for s in reply.scores)


async def test_llm_scorer_reads_yes_probability_from_the_local_llm(local_llm):
    settings = RerankerSettings(port=0, scorer="llm",
                                llm={"base_url": local_llm, "timeout": 120, "max_passage_chars": 60})
    before = sample("graphmesh_reranker_truncated_total")
    async with Serving(settings) as stub:
        reply = await stub.Rerank(request("What is the capital of France?", [
            "Bananas are yellow fruit that grow in tropical countries.",
            "Paris is the capital and largest city of France.",
            "Title line\n" + "The weather report says it will rain tomorrow. " * 4,
        ]), timeout=300)
    assert reply.scorer == "llm" and reply.truncated_passages == 1
    assert sample("graphmesh_reranker_truncated_total") - before == 1
    assert reply.scores[0].id == "p1"
    assert all(0.0 <= s.score <= 1.0 for s in reply.scores)
    assert reply.scores[0].score > reply.scores[-1].score
