"""OpenAI's ignored chat parameters keep the types OpenAI's API gives them
(services/gateway/api/openai_compat/ignored_params.py)."""
from __future__ import annotations

import pytest

from services.gateway.api.openai_compat.ignored_params import IGNORED_PARAM_RULES, ignored_param_error

ACCEPTED = {"temperature": 0.2, "top_p": 1, "max_tokens": 256, "max_completion_tokens": 1, "seed": -7,
            "presence_penalty": -2, "frequency_penalty": 1.5, "stop": ["\\n", "。"], "user": "u1", "store": False,
            "metadata": {"team": "search"}, "logit_bias": {"50256": -100}, "stream_options": {"include_usage": True},
            "modalities": ["text"], "parallel_tool_calls": True, "service_tier": "auto", "reasoning_effort": "low",
            "verbosity": "low", "prompt_cache_key": "k", "safety_identifier": "s", "prediction": {}, "audio": {},
            "web_search_options": {}}


def test_every_rule_is_exercised_by_an_accepted_value():
    assert set(ACCEPTED) == set(IGNORED_PARAM_RULES)


def test_values_of_openais_types_are_accepted_and_null_stands_for_absent():
    assert ignored_param_error(ACCEPTED) is None
    assert ignored_param_error({name: None for name in IGNORED_PARAM_RULES}) is None
    assert ignored_param_error({}) is None


@pytest.mark.parametrize("name,value,expected", [
    ("max_tokens", "x", "a positive integer"), ("max_tokens", 0, "a positive integer"),
    ("max_tokens", True, "a positive integer"), ("max_tokens", 1.5, "a positive integer"),
    ("temperature", 2.5, "a number from 0 to 2"), ("temperature", "hot", "a number from 0 to 2"),
    ("top_p", -0.1, "a number from 0 to 1"), ("frequency_penalty", float("nan"), "a number from -2 to 2"),
    ("stop", ["a", "b", "c", "d", "e"], "a string or a list of at most 4 strings"), ("stop", [1], "a string"),
    ("seed", "42", "an integer"), ("user", 5, "a string"), ("store", "yes", "a boolean"),
    ("metadata", {"a": 1}, "an object of string values"), ("logit_bias", {"1": 101}, "from -100 to 100"),
    ("stream_options", [], "an object"), ("modalities", "text", "a list"),
])
def test_a_value_openai_would_refuse_is_named_with_the_form_it_must_have(name, value, expected):
    param, message, code = ignored_param_error({**ACCEPTED, name: value})
    assert param == name and message.startswith("must be ") and expected in message
    assert code in ("invalid_value", "invalid_type")
