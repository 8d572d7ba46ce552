"""The answer generator's DeepSearch partial answer without an LLM: the
extractive quote of the iteration's evidence, never its label alone."""
from __future__ import annotations

import pytest

from services.gateway.answer.generator import Generator
from services.gateway.downstream.guard import Deadline
from tests.fakes import FakeLlm
from tests.gateway.test_orchestration import settings

pytestmark = [pytest.mark.unit, pytest.mark.asyncio(loop_scope="session")]


async def test_a_partial_answer_quotes_the_evidence_without_the_extractive_label():
    generator = Generator(settings(), FakeLlm())
    partial = await generator.partial_answer("增长率多少时停止？", "", ["增长率低于阈值时停止迭代。"], Deadline(5))
    assert partial == "增长率低于阈值时停止迭代。 [1]"


async def test_evidence_with_nothing_quotable_gives_an_empty_partial_answer_not_the_label():
    generator = Generator(settings(), FakeLlm())
    assert await generator.partial_answer("增长率多少时停止？", "", ["|---|---|"], Deadline(5)) == ""
    assert await generator.partial_answer("增长率多少时停止？", "", [], Deadline(5)) == ""


async def test_the_extractive_answer_never_quotes_a_clause_the_packer_cut_the_rest_of_its_sentence_from():
    from graphmesh.common.v1 import types_pb2
    from graphmesh.gateway.v1 import gateway_pb2
    from services.gateway.config import GatewaySettings
    from services.gateway.server import use_cases
    from tests.fakes import FakeExpander, FakeFuser, FakeReranker, FakeRetriever, candidate

    cut = candidate("d0", "延迟退房须在前台提前申请。金卡及以上会员可免费延迟至16:00；[TRUNCATED]", "pg.keyword", 5.0, vector_score=0.9)
    pg = FakeRetriever("retriever_pg", [cut])
    pg.collections = [types_pb2.CollectionInfo(name="default", documents=1, domain_pack="generic")]
    mesh = use_cases(GatewaySettings(port=0, rest={"port": -1}, abstention={"enabled": False}),
                     FakeExpander(keywords=("金卡", "延迟", "退房")), [pg, FakeRetriever("retriever_graph", [])],
                     FakeReranker(), FakeFuser(), FakeLlm())
    answer = await mesh.answerer.answer("金卡会员国庆节能免费延迟退房吗", 5, None, Deadline(10))
    assert answer.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE
    assert "免费延迟至16:00" not in answer.answer and "延迟退房须在前台提前申请。" in answer.answer
