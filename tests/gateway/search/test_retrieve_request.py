"""The RetrieveRequest one search sends (SearchFlow._retrieve_request): how
many candidates each channel is asked for."""
from __future__ import annotations

import pytest

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.config import GatewaySettings
from services.gateway.profiles import RetrievalProfile
from services.gateway.search.pipeline import SearchFlow
from services.gateway.search.scope import DEFAULT_SCOPE
from services.gateway.search.understanding import Understanding

pytestmark = pytest.mark.unit


def test_each_channel_is_asked_for_the_profiles_depth_or_for_top_k_when_the_caller_wants_more():
    flow = SearchFlow(GatewaySettings(), None, [], None, None, packs=object())
    understood = Understanding(gateway_pb2.QueryInfo(normalized_query="加班费"), ["加班费"], [0.6, 0.8])
    profile = RetrievalProfile(retrieve_top_k=20)
    asked = {top_k: flow._retrieve_request("加班费", understood, profile, [], frozenset(), DEFAULT_SCOPE,  # noqa: SLF001
                                           top_k=top_k).top_k for top_k in (5, 20, 50, 100)}
    assert asked == {5: 20, 20: 20, 50: 50, 100: 100}  # a Search of top_k 100 can return 100 results
