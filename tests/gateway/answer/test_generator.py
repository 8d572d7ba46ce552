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


def _mesh_over(candidates, pack: str):
    from graphmesh.common.v1 import types_pb2
    from services.gateway.config import GatewaySettings
    from services.gateway.server import use_cases
    from tests.fakes import FakeExpander, FakeFuser, FakeReranker, FakeRetriever

    pg = FakeRetriever("retriever_pg", candidates)
    pg.collections = [types_pb2.CollectionInfo(name="default", documents=len(candidates), domain_pack=pack)]
    return use_cases(GatewaySettings(port=0, rest={"port": -1}, abstention={"enabled": False}),
                     FakeExpander(keywords=("超标", "排放", "处罚")), [pg, FakeRetriever("retriever_graph", [])],
                     FakeReranker(), FakeFuser(), FakeLlm())


def _statute(doc_id: str, status: str):
    from tests.fakes import candidate

    cand = candidate(doc_id, "超标排放大气污染物的，责令改正，处二万元以上二十万元以下罚款。", "pg.keyword", 5.0, vector_score=0.9)
    cand.metadata["status"] = status
    return cand


@pytest.mark.parametrize("status", ["已废止", "历史版本"])
async def test_an_answer_citing_a_repealed_or_historical_article_carries_its_status_and_says_so(status):
    from graphmesh.gateway.v1 import gateway_pb2

    mesh = _mesh_over([_statute("d0", status)], "law_zh")
    answer = await mesh.answerer.answer("超标排放大气污染物怎么处罚？", 5, None, Deadline(10))
    assert answer.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE
    assert [(c.number, c.caveat) for c in answer.citations] == [(1, status)]
    assert answer.answer.endswith(f"注意：[1] 在资料中标注为“{status}”，所引内容可能已不再适用。")


@pytest.mark.parametrize("status, pack", [("现行有效", "law_zh"), ("已被修改", "law_zh"), ("已废止", "generic")])
async def test_a_source_in_force_or_outside_a_pack_that_knows_statuses_gets_no_caveat(status, pack):
    mesh = _mesh_over([_statute("d0", status)], pack)
    answer = await mesh.answerer.answer("超标排放大气污染物怎么处罚？", 5, None, Deadline(10))
    assert answer.citations and all(c.caveat == "" for c in answer.citations)
    assert "注意：" not in answer.answer
