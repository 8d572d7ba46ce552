"""A REST body json_format cannot read: the field named by its proto path,
in the servicers' own terms, and no Python wording in the description
(services/gateway/api/rest_parse_errors.py)."""
from __future__ import annotations

import pytest
from google.protobuf import json_format

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.api.rest_parse_errors import field_of, parse_description

pytestmark = pytest.mark.unit

CASES = [
    ('{"query": "x", "topK": "ten"}', gateway_pb2.SearchRequest, "top_k", "not an integer: 'ten'"),
    ('{"query": "x", "top_k": "ten"}', gateway_pb2.SearchRequest, "top_k", "not an integer"),
    ('{"query": "x", "rerank": "yes"}', gateway_pb2.SearchRequest, "rerank", "true or false"),
    ('{"query": "x", "bogus": 1}', gateway_pb2.SearchRequest, "bogus", "is not a field of this request; its fields: query, topK"),
    ('{"query": "x", "filters": [{"field": "a"}]}', gateway_pb2.SearchRequest, "filters[0].field", "its fields: key, equals, anyOf, range"),
    ('{"files": [{"name": "a.txt", "content": 5}]}', gateway_pb2.IngestRequest, "files.content", "wrong JSON type"),
]


@pytest.mark.parametrize("body,request_class,field,said", CASES, ids=[c[2] for c in CASES])
def test_a_body_json_format_refuses_names_the_field_by_its_proto_path(body, request_class, field, said):
    with pytest.raises(json_format.ParseError) as err:
        json_format.Parse(body, request_class())
    assert field_of(str(err.value), request_class.DESCRIPTOR) == field
    description = parse_description(str(err.value))
    assert said in description and "has no len()" not in description and "int()" not in description
