"""RerankerService with the ltr scorer over gRPC (real grpc.aio server on
port 0): the candidates come back ordered as a tiny model trained here
says, missing candidates are INVALID_ARGUMENT, a missing model file is
FAILED_PRECONDITION, and text scorers still score candidates as passages."""
from __future__ import annotations

import grpc
import pytest

from graphmesh.common.v1 import types_pb2
from graphmesh.reranker.v1 import reranker_pb2
from services.cli import ltr_training
from services.reranker.config import RerankerSettings
from services.reranker.ltr import LtrScorer
from services.reranker.server import build_scorer
from tests.reranker.test_servicer import FakeScorer, Serving
from tests.reranker.test_ltr import TINY, synthetic_questions

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("ltr") / "tiny.txt"
    ltr_training.train(synthetic_questions(), TINY, rounds=10).save_model(str(path))
    return path


def ltr_request() -> reranker_pb2.RerankRequest:
    question = synthetic_questions(1)[0]
    return reranker_pb2.RerankRequest(query="问题", keywords=question["keywords"], candidates=[
        types_pb2.Candidate(id=r["id"], document_id=r["document_id"], title=r["title"], text=r["text"],
                            heading_path=r["heading_path"], fused_score=r["fused_score"],
                            channel_scores=[types_pb2.ChannelScore(channel=c, score=s, rank=k) for c, s, k in r["channels"]])
        for r in question["candidates"]])


async def test_ltr_orders_candidates_as_the_model_says(tiny_model):
    async with Serving(RerankerSettings(port=0), LtrScorer(tiny_model)) as stub:
        reply = await stub.Rerank(ltr_request())
        assert reply.scorer == "ltr" and reply.device == "cpu" and reply.model == str(tiny_model)
        assert reply.scores[0].id == "0-5" and len(reply.scores) == 6
        assert [s.score for s in reply.scores] == sorted((s.score for s in reply.scores), reverse=True)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Rerank(reranker_pb2.RerankRequest(query="问题", passages=[reranker_pb2.Passage(id="p", text="t")]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_ltr_without_model_file_is_failed_precondition(tmp_path):
    scorer = build_scorer(RerankerSettings(port=0, scorer="ltr", ltr_model_file=str(tmp_path / "none.txt")))
    async with Serving(RerankerSettings(port=0, warm_up=False), scorer) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Rerank(ltr_request())
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_text_scorers_score_candidates_as_passages():
    async with Serving(RerankerSettings(port=0, max_wait_ms=0), FakeScorer()) as stub:
        reply = await stub.Rerank(ltr_request())
        assert len(reply.scores) == 6 and reply.scorer == "fake"
