"""Resource names, page tokens and REST path templates of the lifecycle RPCs."""
from __future__ import annotations

import pytest

from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import InvalidArgument
from services.gateway.library import resource_names as rn
from services.gateway.api.paths import aiohttp_path, fill_message, template_regex

pytestmark = pytest.mark.unit


def test_parents_and_document_names():
    assert rn.parse_parent("collections/hr") == ["hr"]
    assert rn.parse_parent("collections/-") is None
    for bad in ("collections/", "collections/a/b", "projects/x", "collections/bad name"):
        with pytest.raises(InvalidArgument) as err:
            rn.parse_parent(bad)
        assert err.value.field == "parent"
    assert rn.parse_document_name("collections/hr/documents/手册/第一章.pdf") == ("hr", "手册/第一章.pdf")
    assert rn.parse_document_name("collections/-/documents/42") == (None, "42")
    with pytest.raises(InvalidArgument):
        rn.parse_document_name("collections/hr/documents/")
    with pytest.raises(InvalidArgument, match="must name one collection"):
        rn.parse_collection_name("collections/-")
    for bad in ("", "hr", "collections/a/b"):  # a trial read "or collections/-" for an empty name, which is refused
        with pytest.raises(InvalidArgument, match=r"^name: must be collections/\{collection\}, got"):
            rn.parse_collection_name(bad)
    assert rn.document_name("hr", "a/b") == "collections/hr/documents/a/b"


def test_page_tokens_are_bound_to_parent_and_filter():
    token = rn.encode_page_token("doc-9", "collections/hr", 'status = "x"')
    assert rn.decode_page_token(token, "collections/hr", 'status = "x"') == "doc-9"
    assert rn.decode_page_token("", "collections/hr", "") == ""
    with pytest.raises(InvalidArgument, match="another parent or filter"):
        rn.decode_page_token(token, "collections/hr", "")
    with pytest.raises(InvalidArgument, match="not a page token"):
        rn.decode_page_token("not-a-token!", "collections/hr", "")


def test_rest_templates():
    assert aiohttp_path("/v1/{parent=collections/*}/documents") == "/v1/{parent:collections/[^/]+}/documents"
    rx = template_regex("/v1/{name=collections/*/documents/**}")
    assert rx.match("/v1/collections/hr/documents/手册/a.pdf").group("name") == "collections/hr/documents/手册/a.pdf"
    assert rx.match("/v1/collections/hr/documents") is None
    request = gateway_pb2.ListDocumentsRequest()
    assert fill_message(request, {"parent": "collections/hr"}, {"pageSize": "5", "filter": 'a = "b"'}) is None
    assert (request.parent, request.page_size, request.filter) == ("collections/hr", 5, 'a = "b"')
    assert fill_message(gateway_pb2.ListDocumentsRequest(), {}, {"page_size": "x"}) == ("page_size", "must be an integer, got 'x'")
    # a trial's pageSize=99999999999 was told it "must be an integer"
    assert fill_message(gateway_pb2.ListDocumentsRequest(), {}, {"pageSize": "99999999999"}) == ("page_size", "99999999999 is out of range")
    assert fill_message(gateway_pb2.ListDocumentsRequest(), {}, {"nope": "1"})[0] == "nope"
