import json

import pytest
from services.ingest.jsonl_documents import parse_jsonl

pytestmark = pytest.mark.unit


def test_law_record_becomes_heading_path():
    payload = '{"id": 1, "law": "中华人民共和国专利法", "status": "现行有效", "chapter": "第一章 总则", "section": null, "article": "第一条", "text": "为了保护专利权人的合法权益，制定本法。"}'.encode()
    docs, failures = parse_jsonl(payload)
    assert not failures
    assert docs[0].id == "1"
    assert docs[0].heading_path == ["中华人民共和国专利法", "第一章 总则", "第一条"]
    assert docs[0].metadata == {"status": "现行有效", "law": "中华人民共和国专利法"}  # filterable


def test_bad_lines_are_reported_and_others_kept():
    payload = b"\n".join([
        '{"id": "a", "text": "好的。"}'.encode(),
        b'{"id": "b", "text": "   "}',
        b"\xff\xfe not utf-8",
        b"{not json",
        b'{"text": "no id"}',
        b'["not an object"]',
    ])
    docs, failures = parse_jsonl(payload)
    assert [d.id for d in docs] == ["a"]
    assert [(f.index, f.field) for f in failures] == [(1, "text"), (2, ""), (3, ""), (4, "id"), (5, "")]
    assert "UTF-8" in failures[1].reason


def test_unstorable_text_is_a_failure_of_its_record_only():
    docs, failures = parse_jsonl(b'{"id": "1", "text": "a\\ud800"}\n{"id": "2", "text": "ok", "metadata": {"k": "\\u0000"}}\n{"id": "3", "text": "fine"}\n')
    assert [d.id for d in docs] == ["3"]
    assert [(f.index, f.field) for f in failures] == [(0, "text"), (1, "metadata")]


def test_metadata_values_that_are_not_strings_are_stored_as_json_text():
    from services.ingest.jsonl_documents import parse_record
    parsed = parse_record(0, {"id": "d", "text": "正文。", "metadata": {
        "flag": True, "year": 2025, "ratio": 0.5, "nested": {"a": 1, "名": "值"}, "tags": ["甲", "乙"], "gone": None, "dept": "人事"}})
    assert parsed.metadata == {"flag": "true", "year": "2025", "ratio": "0.5", "nested": '{"a":1,"名":"值"}',
                               "tags": '["甲","乙"]', "dept": "人事"}


def test_a_record_with_a_field_it_does_not_have_fails_naming_it_and_the_others_are_read():
    # a fresh user's misspelt "metdata" and "titel" were dropped without a word: no metadata, title = id
    lines = [{"id": "typo1", "text": "晚餐补贴", "metdata": {"dept": "行政"}},
             {"id": "typo2", "text": "晚餐补贴", "titel": "Dinner"},
             {"id": "own", "text": "x", "url": "https://example.com/a"},
             {"id": "good", "text": "晚餐补贴", "title": "Dinner", "metadata": {"dept": "行政", "url": "https://example.com/a"}}]
    docs, failures = parse_jsonl("\n".join(json.dumps(r, ensure_ascii=False) for r in lines).encode())
    assert [(f.index, f.id, f.field) for f in failures] == [(0, "typo1", "metdata"), (1, "typo2", "titel"), (2, "own", "url")]
    assert 'did you mean "metadata"?' in failures[0].reason and 'did you mean "title"?' in failures[1].reason
    assert "did you mean" not in failures[2].reason and 'goes under "metadata"' in failures[2].reason
    assert [(d.id, d.title, d.metadata) for d in docs] == [("good", "Dinner", {"dept": "行政", "url": "https://example.com/a"})]


def test_an_id_whose_rest_name_could_not_reach_it_fails_as_a_file_name_would():
    ids = ["../../y", "/abs", "x//y", "a\u202eb", "./x", "手册/第一条", "a.b/c"]
    payload = "\n".join(json.dumps({"id": i, "text": "第一条 内容。"}, ensure_ascii=False) for i in ids).encode()
    docs, failures = parse_jsonl(payload)
    assert [d.id for d in docs] == ["手册/第一条", "a.b/c"]
    assert [(f.index, f.field) for f in failures] == [(0, "id"), (1, "id"), (2, "id"), (3, "id"), (4, "id")]
    assert "path segment" in failures[0].reason and "invisible" in failures[3].reason
    assert [f.id for f in failures][:3] == ["../../y", "/abs", "x//y"]  # the failure names the record


def test_a_metadata_key_no_filter_could_name_fails_its_record_naming_it():
    # a trial's {"部门 名称": "人事", "": "empty"} was stored, then `部门 名称 = "人事"` could not be asked
    records = [{"id": "1", "text": "甲", "metadata": {"部门 名称": "人事"}}, {"id": "2", "text": "乙", "metadata": {"": "x"}},
               {"id": "3", "text": "丙", "metadata": {"部门": "人事", "source.url-v2": "u", "名": "值"}}]
    docs, failures = parse_jsonl("\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode())
    assert [(f.index, f.field) for f in failures] == [(0, "metadata"), (1, "metadata")]
    assert "'部门 名称' is not a metadata key" in failures[0].reason and "'' is not a metadata key" in failures[1].reason
    assert [(d.id, d.metadata) for d in docs] == [("3", {"部门": "人事", "source.url-v2": "u", "名": "值"})]
