"""graphmesh up --llm's environment for the services it starts."""
from __future__ import annotations

import pytest

from services.cli.stack import point_at_local_llm

pytestmark = pytest.mark.unit

LOCAL = "http://127.0.0.1:50060/v1"


def test_the_local_llm_answers_with_the_citation_grammar():
    env: dict[str, str] = {}
    point_at_local_llm(env, LOCAL)
    assert env["GRAPHMESH_GATEWAY_LLM__BASE_URL"] == env["GRAPHMESH_EXPANDER_LLM__BASE_URL"] == LOCAL
    assert env["GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR"] == "true"


def test_a_users_own_endpoint_and_choice_are_kept():
    """Another server may reject llama.cpp's grammar field: the gateway
    pointed elsewhere gets no grammar, and a user's explicit false stays."""
    elsewhere = {"GRAPHMESH_GATEWAY_LLM__BASE_URL": "https://api.example.com/v1"}
    point_at_local_llm(elsewhere, LOCAL)
    assert "GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR" not in elsewhere
    assert elsewhere["GRAPHMESH_EXPANDER_LLM__BASE_URL"] == LOCAL
    off = {"GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR": "false"}
    point_at_local_llm(off, LOCAL)
    assert off["GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR"] == "false"
