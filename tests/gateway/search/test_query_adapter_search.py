"""One Search over small fakes of the gateway's clients (SearchFlow): a lay
question over a law collection sends retriever_pg the law pack's adapted
query vector (channel pg.adapted) with its vector channels; a question of
another type, a collection of another pack, or pg.adapted switched off sends
none."""
from __future__ import annotations

import numpy as np
import pytest

import domains
from graphmesh.common.v1 import types_pb2
from services.gateway.config import GatewaySettings
from services.gateway.downstream.guard import Deadline
from services.gateway.search.pipeline import SearchFlow
from services.gateway.search.scope import Scope
from tests.fakes import FakeExpander, FakeFuser, FakeReranker, FakeRetriever

pytestmark = [pytest.mark.unit, pytest.mark.asyncio(loop_scope="session")]

LAY = "QUESTION_TYPE_LAY_CONSULTATION"
VECTOR = (np.arange(1, 385, dtype=np.float32) / np.linalg.norm(np.arange(1, 385))).tolist()


class TypedExpander(FakeExpander):
    """A FakeExpander that reads every question as ``question_type``."""

    def __init__(self, question_type: str) -> None:
        super().__init__(embedding=VECTOR, embedding_model="e5onnx")
        self.question_type = question_type

    async def expand(self, request, timeout):
        reply = await super().expand(request, timeout)
        reply.question_type_name = self.question_type
        return reply


async def adapted_sent(question_type: str, pack: str, disabled: frozenset[str] = frozenset(),
                       overlap: bool = True) -> list[list[float]]:
    pg = FakeRetriever("retriever_pg")
    pg.collections = [types_pb2.CollectionInfo(name="laws", documents=1, domain_pack=pack)]
    settings = GatewaySettings(graph_enabled=False, overlap_query_embedding=overlap)
    flow = SearchFlow(settings, TypedExpander(question_type), [pg], FakeReranker(), FakeFuser())
    await flow.search("公司拖欠工资三个月，我可以要求什么赔偿？", 10, False, Deadline(10.0), disabled,
                      Scope(collections=("laws",)))
    return [list(request.adapted_embedding) for rpc, request in pg.calls if rpc == "retrieve" and request.adapted_embedding]


@pytest.mark.parametrize("overlap", [True, False])
async def test_a_lay_question_over_a_law_collection_sends_the_adapted_vector(overlap):
    adapter = domains.LAW_ZH.query_adapter
    sent = await adapted_sent(LAY, "law_zh", overlap=overlap)
    assert len(sent) == 1 and sent[0] == pytest.approx(adapter.adapt(VECTOR), abs=1e-6)
    assert sent[0] != pytest.approx(VECTOR, abs=1e-3)  # mapped, not the question's own vector


async def test_no_adapted_vector_for_another_type_another_pack_or_pg_adapted_off():
    assert await adapted_sent("QUESTION_TYPE_CASE_FACTS", "law_zh") == []
    assert await adapted_sent(LAY, "generic") == []
    assert await adapted_sent(LAY, "law_zh", frozenset({"pg.adapted"})) == []
