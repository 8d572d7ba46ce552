"""SearchResponse.context_ids: the packed context's numbering as result ids,
set from the fuser's PackedContext and cut with the context when an answer
keeps its first top_k results (handlers.first_results)."""
from __future__ import annotations

import pytest

from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.answer.handlers import first_results
from services.gateway.downstream.guard import Trace
from services.gateway.search.fuse_request import to_retrieval
from tests.fakes import candidate

pytestmark = pytest.mark.unit


def fused(*ids: str) -> fuser_pb2.FuseResponse:
    cands = [candidate(i, f"第{i}条 内容{i}。", "pg.keyword", 1.0) for i in ids]
    text = "\n".join(f"[{n}] 测试法 第一条\n第{i}条 内容{i}。" for n, i in enumerate(ids, start=1))
    return fuser_pb2.FuseResponse(candidates=cands, context=fuser_pb2.PackedContext(text=text, cited_ids=[c.id for c in cands]))


def test_context_ids_number_the_packed_results_and_follow_a_cut_context():
    retrieval = to_retrieval(fused("a", "b", "c"), [], Trace(), gateway_pb2.QueryInfo())
    assert list(retrieval.response.context_ids) == ["a#0", "b#0", "c#0"]
    cut = first_results(retrieval, 2)
    assert list(cut.response.context_ids) == ["a#0", "b#0"] and "[3]" not in cut.response.context
