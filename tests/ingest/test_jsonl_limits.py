"""JSONL records nested deeper than MAX_JSON_DEPTH fail alone, with the line
and field named, at any depth (no RecursionError); so do ids, titles and
heading paths longer than a store can index."""
from __future__ import annotations

import pytest

import json

from services.ingest.document_ids import MAX_HEADING_CHARS, MAX_ID_CHARS
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


def failures_of(*records: dict) -> list[tuple[int, str, str]]:
    docs, failures = parse_jsonl("\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode())
    return [(f.index, f.field, f.reason) for f in failures]


def test_ids_titles_and_heading_paths_at_their_limits_are_read():
    docs, failures = parse_jsonl("\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"id": "i" * MAX_ID_CHARS, "text": "甲"},
        {"id": "t", "title": "长" * MAX_HEADING_CHARS, "text": "乙"},
        {"id": "h", "heading_path": ["章" * 500, "节" * 500], "text": "丙"},
    ]).encode())
    assert not failures and [d.id for d in docs] == ["i" * MAX_ID_CHARS, "t", "h"]


def test_an_over_long_id_title_or_heading_path_fails_its_record_naming_the_field():
    """A trial's 100,000-character title: PostgreSQL stored it, Neo4j's index refused it, and the
    'failed' document was found by Search; now it is refused before anything is stored."""
    got = failures_of({"id": "i" * (MAX_ID_CHARS + 1), "text": "甲"},
                      {"id": "t", "title": "长" * 100_000, "text": "乙"},
                      {"id": "h", "heading_path": ["章" * 600, "节" * 600], "text": "丙"},
                      {"id": "ok", "text": "丁"},
                      {"id": "law", "law": "某法", "chapter": "章" * 700, "article": "条" * 400, "text": "戊"})
    assert [(index, field) for index, field, _ in got] == [(0, "id"), (1, "title"), (2, "heading_path"), (4, "chapter")]
    assert f"at most {MAX_ID_CHARS} characters (it has {MAX_ID_CHARS + 1})" in got[0][2]
    assert "at most 1,000 characters (it has 100,000)" in got[1][2]
    assert "in all (it has 1,200)" in got[2][2]
    assert got[3][2] == "with law and article makes a heading path of 1,102 characters; at most 1,000 in all"
