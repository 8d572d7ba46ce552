"""A REST body json_format cannot read: the field named by its proto path,
in the servicers' own terms, and no Python wording in the description
(services/gateway/api/rest_parse_errors.py)."""
from __future__ import annotations

import pytest
from google.protobuf import json_format

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.api.rest_parse_errors import base64_error, carries_bytes, field_of, parse_description, shape_error

pytestmark = pytest.mark.unit

CASES = [
    ('{"query": "x", "topK": "ten"}', gateway_pb2.SearchRequest, "top_k", "not an integer: 'ten'"),
    ('{"query": "x", "top_k": "ten"}', gateway_pb2.SearchRequest, "top_k", "not an integer"),
    ('{"query": "x", "rerank": "yes"}', gateway_pb2.SearchRequest, "rerank", "true or false"),
    ('{"query": "x", "bogus": 1}', gateway_pb2.SearchRequest, "bogus", "is not a field of this request; its fields: query, topK"),
    ('{"query": "x", "filters": [{"field": "a"}]}', gateway_pb2.SearchRequest, "filters[0].field", "its fields: key, equals, anyOf, range"),
    ('{"files": [{"name": "a.txt", "content": 5}]}', gateway_pb2.IngestRequest, "files.content", "wrong JSON type"),
    ('{"query": "x", "filters": [{"key": "a", "equals": "b", "range": {"gt": "1"}}]}', gateway_pb2.SearchRequest,
     "filters[0]", "sets more than one of equals, anyOf, range: give exactly one"),
    # a fresh user's repeated key read "body: Failed to load JSON: Failed to load JSON: duplicate key query.."
    ('{"query": "a", "query": "年假"}', gateway_pb2.SearchRequest, "query", "is given more than once in the JSON object"),
    ('{"query": "a", "topK": 1, "topK": 2}', gateway_pb2.SearchRequest, "top_k", "is given more than once"),
]


@pytest.mark.parametrize("body,request_class,field,said", CASES, ids=[c[2] for c in CASES])
def test_a_body_json_format_refuses_names_the_field_by_its_proto_path(body, request_class, field, said):
    with pytest.raises(json_format.ParseError) as err:
        json_format.Parse(body, request_class())
    assert field_of(str(err.value), request_class.DESCRIPTOR) == field
    description = parse_description(str(err.value))
    assert said in description and "has no len()" not in description and "int()" not in description
    assert "Failed to load JSON: Failed" not in description and ".." not in description


SHAPES = [
    # a fresh user's filter: anyOf given the value itself was reported as "filters[0].any_of.u: is not a field"
    ('{"query": "x", "filters": [{"key": "encoding", "anyOf": "utf-8"}]}', gateway_pb2.SearchRequest,
     "filters[0].any_of", "must be a JSON object with the fields values, got a string"),
    ('{"query": "x", "filters": {"key": "a"}}', gateway_pb2.SearchRequest, "filters", "must be a JSON array of objects, got an object"),
    ('{"query": "x", "filters": ["status"]}', gateway_pb2.SearchRequest, "filters[0]", "got a string"),
    ('{"files": [{"name": "a.txt", "metadata": "x"}]}', gateway_pb2.IngestRequest, "files[0].metadata", "keys and values"),
    # a fresh user's number among metadata values was reported as "files.metadata: Failed to parse files field: ..."
    ('{"files": [{"name": "a.txt", "content": "eA=="}, {"name": "b.txt", "content": "eA==", "metadata": {"dept": "hr", "year": 2024}}]}',
     gateway_pb2.IngestRequest, "files[1].metadata.year", "must be a JSON string, got a number"),
    # a fresh user's file content given as a number was reported as "files.content", with no index
    ('{"files": [{"name": "a.txt", "content": "eA=="}, {"name": "b.txt", "content": 5}]}', gateway_pb2.IngestRequest,
     "files[1].content", "must be a JSON string (base64), got a number"),
    # a fresh user's range bound given as a number was reported as "filters.gte: ... expected string or bytes-like object"
    ('{"query": "x", "filters": [{"key": "a", "range": {"gte": "1"}}, {"key": "b", "range": {"lte": 5}}]}',
     gateway_pb2.SearchRequest, "filters[1].range.lte",
     'must be a JSON string ("10"; bounds that are all numbers compare as numbers), got a number'),
    ('{"query": 5}', gateway_pb2.SearchRequest, "query", "must be a JSON string, got a number"),
    ('{"query": "x", "collections": ["a", true]}', gateway_pb2.SearchRequest, "collections[1]", "must be a JSON string, got true or false"),
    # a trial's null in a list was reported as "got an object"
    ('{"query": "x", "collections": [null]}', gateway_pb2.SearchRequest, "collections[0]", "must be a JSON string, got null"),
]


@pytest.mark.parametrize("body,request_class,field,said", SHAPES, ids=[c[2] for c in SHAPES])
def test_a_value_of_the_wrong_json_kind_is_named_with_what_it_should_be(body, request_class, field, said):
    import json

    with pytest.raises(json_format.ParseError):
        json_format.Parse(body, request_class())
    named, description = shape_error(json.loads(body), request_class.DESCRIPTOR)
    assert named == field and said in description


def test_bodies_of_the_right_shape_have_no_shape_error():
    import json

    good = {"query": "x", "filters": [{"key": "status", "anyOf": {"values": ["a"]}}, {"key": "y", "range": {"gte": "1"}}]}
    assert shape_error(good, gateway_pb2.SearchRequest.DESCRIPTOR) is None
    assert shape_error({"query": "x", "filters": None}, gateway_pb2.SearchRequest.DESCRIPTOR) is None
    assert shape_error({"files": [{"name": "a", "metadata": {"k": "v"}}]}, gateway_pb2.IngestRequest.DESCRIPTOR) is None
    json_format.Parse(json.dumps(good), gateway_pb2.SearchRequest())  # json_format agrees


@pytest.mark.parametrize("content,said", [
    ("aGVsbG8g*d29y!bGQ=", "'*' at character 8"),  # json_format skips the two characters: "hello world"
    ("@@@", "'@' at character 0"),  # json_format reads it as an empty file
    ("aGVsbG8=====", "more than two '='"),
])
def test_file_content_that_is_not_base64_is_named_though_json_format_reads_it(content, said):
    body = {"files": [{"name": "a.txt", "content": "eA=="}, {"name": "b.txt", "content": content}]}
    json_format.ParseDict(body, gateway_pb2.IngestRequest())  # accepted, characters skipped
    named, description = shape_error(body, gateway_pb2.IngestRequest.DESCRIPTOR)
    assert named == "files[1].content" and said in description
    # one character over is json_format's own error; named the same way
    with pytest.raises(json_format.ParseError):
        json_format.ParseDict({"files": [{"name": "a.txt", "content": "aGVsbG8gd29ybGQab"}]}, gateway_pb2.IngestRequest())
    assert shape_error({"files": [{"name": "a.txt", "content": "aGVsbG8gd29ybGQab"}]}, gateway_pb2.IngestRequest.DESCRIPTOR) \
        == ("files[0].content", "must be base64: 17 characters leave one over (a character missing or extra)")


def test_base64_of_either_alphabet_wrapped_or_unpadded_is_content():
    for content in ("aGVsbG8gd29ybGQ=", "aGVsbG8gd29ybGQ", "aGVsbG8g\nd29ybGQ=", "-_8=", "+/8=", ""):
        assert base64_error(content) is None, content
        assert shape_error({"files": [{"name": "a.txt", "content": content}]}, gateway_pb2.IngestRequest.DESCRIPTOR) is None
    assert carries_bytes(gateway_pb2.IngestRequest.DESCRIPTOR) and not carries_bytes(gateway_pb2.SearchRequest.DESCRIPTOR)
