"""Entity and triple records: one bad record is reported, the rest kept, and
every store gets the same entities (no repeats, nothing a store rejects)."""
from __future__ import annotations

import pytest

import json

from services.ingest.jsonl_entities import MAX_NAME_CHARS, parse_entities, parse_triples

pytestmark = pytest.mark.unit


def lines(*records) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records).encode()


def test_bad_entity_records_are_failures_and_the_rest_is_kept():
    entities, failures, line_of = parse_entities(lines(
        {"name": "马铃薯", "aliases": "土豆、洋芋"},
        {"name": "马铃薯", "definition": "second copy"},
        {"name": "x" * (MAX_NAME_CHARS + 1)},
        {"name": "芋头", "category": "c" * (MAX_NAME_CHARS + 1)},
        {"name": "山药", "aliases": ["a" * (MAX_NAME_CHARS + 1)]},
        '{"name": "bad\\ud800"}',
        {"name": "nul\u0000"},
        {"name": "红薯"},
    ))
    assert [e.name for e in entities] == ["马铃薯", "红薯"] and line_of == [0, 7]
    assert list(entities[0].aliases) == ["土豆", "洋芋"]
    by_line = {f.index: (f.field, f.reason) for f in failures}
    assert sorted(by_line) == [1, 2, 3, 4, 5, 6]
    assert by_line[1] == ("name", "repeats the entity on line 1")
    assert by_line[2][0] == "name" and by_line[3][0] == "category" and by_line[4][0] == "aliases"
    assert "surrogate" in by_line[5][1] and "NUL" in by_line[6][1]


def test_triples_with_unstorable_text_are_failures():
    triples, failures, _ = parse_triples(lines(
        {"subject": "马铃薯", "predicate": "产地", "object": "云南"},
        '{"subject": "马铃薯", "predicate": "产地", "object": "x\\ud800"}',
        {"subject": "马铃薯", "predicate": " ", "object": "云南"},
    ))
    assert len(triples) == 1 and [(f.index, f.field) for f in failures] == [(1, "object"), (2, "predicate")]
