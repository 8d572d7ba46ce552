"""JSONL records nested deeper than MAX_JSON_DEPTH fail alone, with the line
and field named, at any depth (no RecursionError)."""
from __future__ import annotations

import pytest

import json

from services.ingest.jsonl_documents import MAX_JSON_DEPTH, parse_jsonl, too_deep_field
from services.ingest.jsonl_entities import parse_entities

pytestmark = pytest.mark.unit


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_depth_is_measured_without_recursion():
    assert too_deep_field({"metadata": nested(MAX_JSON_DEPTH - 1)}) == ""
    assert too_deep_field({"text": "x", "metadata": nested(MAX_JSON_DEPTH)}) == "metadata"
    assert too_deep_field({"metadata": nested(50_000)}) == "metadata"


def test_documents_hostile_lines_fail_alone_with_line_and_field():
    lines = [json.dumps({"id": "a", "text": "甲"}),
             "[" * 200_000 + "]" * 200_000,
             json.dumps({"id": "b", "text": "乙", "metadata": {"k": nested(40)}}),
             json.dumps({"id": "c", "text": "丙"})]
    docs, failures = parse_jsonl("\n".join(lines).encode())
    assert [d.id for d in docs] == ["a", "c"]
    assert [(f.index, f.field) for f in failures] == [(1, ""), (2, "metadata")]
    assert all("nested deeper" in f.reason for f in failures)


def test_entities_hostile_lines_fail_alone():
    lines = [json.dumps({"name": "甲"}, ensure_ascii=False), '{"name": "乙", "attributes": ' + "{\"a\":" * 100_000 + "1" + "}" * 100_001,
             json.dumps({"name": "丙"}, ensure_ascii=False)]
    entities, failures, _ = parse_entities("\n".join(lines).encode())
    assert [e.name for e in entities] == ["甲", "丙"]
    assert [f.index for f in failures] == [1]
