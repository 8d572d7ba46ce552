"""The shape of REST replies: every field of a result is printed, zero
values included, through the real REST app over a real gateway gRPC server
whose downstream services are fakes."""
from __future__ import annotations

import json

import pytest
from aiohttp import ClientSession

from graphmesh.common.v1 import types_pb2
from services.common import names
from tests.fakes import FakeRetriever

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def test_a_result_scored_zero_carries_its_fused_score(fake_gateway):
    hit = types_pb2.Candidate(id="c1", document_id="d1", title="员工手册", text="年假为五天。",
                              channel_scores=[types_pb2.ChannelScore(channel=names.PG_KEYWORD, score=1.0, rank=1)])
    gateway = await fake_gateway(pg=FakeRetriever("retriever_pg", candidates=[hit]))
    async with ClientSession() as session:
        async with session.post(gateway.rest_url + "/v1/query:search", json={"query": "年假几天"}) as reply:
            assert reply.status == 200
            body = json.loads(await reply.text())
    first = body["results"][0]
    assert first["id"] == "c1"
    assert first["fusedScore"] == 0  # the fake fuser scores nothing: 0, not a missing key
    assert first["headingPath"] == [] and first["contextText"] == ""
