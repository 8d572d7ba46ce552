"""OpenAI chat parameters that GraphMesh accepts and ignores (the gateway's
LLM settings decide length and sampling), checked against the types and
ranges OpenAI's Chat Completions API reference gives them, so that a
client's mistake (``"max_tokens": "x"``) is a 400 here as it would be
there instead of passing unnoticed. ``null`` is accepted for each, as
OpenAI accepts it."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_string_list(value: Any, most: int) -> bool:
    return isinstance(value, list) and len(value) <= most and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class ParamRule:
    """What an ignored parameter must be: ``accepts(value)``, the
    ``expected`` form said in the error and its OpenAPI 3.0 ``schema``
    (served at /openapi.json)."""

    accepts: Callable[[Any], bool]
    expected: str
    schema: dict


def _number(low: float, high: float) -> ParamRule:
    return ParamRule(lambda v: _is_number(v) and low <= v <= high, f"a number from {low:g} to {high:g}",
                     {"type": "number", "minimum": low, "maximum": high})


_POSITIVE_INTEGER = ParamRule(lambda v: _is_integer(v) and v >= 1, "a positive integer", {"type": "integer", "minimum": 1})
_STRING = ParamRule(lambda v: isinstance(v, str), "a string", {"type": "string"})
_BOOLEAN = ParamRule(lambda v: isinstance(v, bool), "a boolean", {"type": "boolean"})
_OBJECT = ParamRule(lambda v: isinstance(v, dict), "an object", {"type": "object"})

#: Parameter -> its rule (OpenAI API reference, "Create chat completion").
IGNORED_PARAM_RULES: dict[str, ParamRule] = {
    "temperature": _number(0, 2),
    "top_p": _number(0, 1),
    "presence_penalty": _number(-2, 2),
    "frequency_penalty": _number(-2, 2),
    "max_tokens": _POSITIVE_INTEGER,
    "max_completion_tokens": _POSITIVE_INTEGER,
    "seed": ParamRule(_is_integer, "an integer", {"type": "integer"}),
    "stop": ParamRule(lambda v: isinstance(v, str) or _is_string_list(v, 4), "a string or a list of at most 4 strings",
                      {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "maxItems": 4}]}),
    "user": _STRING,
    "service_tier": _STRING,
    "reasoning_effort": _STRING,
    "verbosity": _STRING,
    "prompt_cache_key": _STRING,
    "safety_identifier": _STRING,
    "store": _BOOLEAN,
    "parallel_tool_calls": _BOOLEAN,
    "metadata": ParamRule(lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
                          "an object of string values", {"type": "object", "additionalProperties": {"type": "string"}}),
    "logit_bias": ParamRule(lambda v: isinstance(v, dict) and all(_is_number(x) and -100 <= x <= 100 for x in v.values()),
                            "an object of numbers from -100 to 100",
                            {"type": "object", "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100}}),
    "stream_options": _OBJECT,
    "prediction": _OBJECT,
    "audio": _OBJECT,
    "web_search_options": _OBJECT,
    "modalities": ParamRule(lambda v: _is_string_list(v, 8), "a list of at most 8 strings",
                            {"type": "array", "items": {"type": "string"}, "maxItems": 8}),
}


def ignored_param_error(body: dict) -> tuple[str, str, str] | None:
    """The first ignored parameter of ``body`` (in IGNORED_PARAM_RULES'
    order) whose value OpenAI's API would refuse, as (parameter, "must be
    <expected form>", code): code "invalid_value" for a value of the right
    JSON type out of its range (``"temperature": 5``), else "invalid_type";
    None when all are acceptable or absent."""
    for name, rule in IGNORED_PARAM_RULES.items():
        value = body.get(name)
        if value is not None and not rule.accepts(value):
            expected_type = rule.schema.get("type")
            in_type = (expected_type == "number" and _is_number(value)) or (expected_type == "integer" and _is_integer(value))
            return name, f"must be {rule.expected}", "invalid_value" if in_type else "invalid_type"
    return None
