"""Hypothesis strategies that build protobuf requests from their message
descriptors (used by tests/test_fuzz_contracts.py and
bench/fuzz_contracts.py).

``message_bytes(descriptor)`` draws the wire bytes of a request: every field
of the message may be present or missing, repeated fields get 0..4 values
(and a singular field may be sent twice on the wire, which protobuf merges),
strings mix ASCII, CJK, control characters, right-to-left marks and
overrides, up to about 1 MB, and are sometimes invalid UTF-8 (the wire form
of a lone surrogate, which no protobuf library can set); integers are drawn
at and beyond their type's range (the wire carries 64 bits, so an int32 gets
values protobuf truncates), floats include NaN and infinities, enums include
undefined values. Nested messages recurse to ``depth``.

``json_body(descriptor)`` draws REST bodies the same way (JSON names,
strings with lone surrogates as JSON escapes, numbers beyond range as JSON
numbers).
"""
from __future__ import annotations

import json
import re
import struct

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import strategies as st

F = FieldDescriptor
#: Characters that have broken text handling elsewhere: C0/C1 controls, NUL,
#: bidi marks and overrides, BOM, line/paragraph separators, combining marks.
SPECIAL = "\x00\x01\x07\x08\x0b\x0c\x1b\x7f\x85\u200b\u200e\u200f\u202a\u202b\u202d\u202e\u2066\u2069\ufeff\u2028\u2029\u0301\ufffd"
HOSTILE = ["'; DROP TABLE chunks; --", "MATCH (n) DETACH DELETE n", "}) RETURN n //", 'title:"x" OR *:*', "a* AND b~2",
           "\\", "%s %d {0}", "${jndi:x}", "<script>", "用户词 3 n", "1=1", "$query", "\\u0000"]
LIMITS = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1), F.TYPE_SINT32: (-(2**31), 2**31 - 1), F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1), F.TYPE_SINT64: (-(2**63), 2**63 - 1), F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1), F.TYPE_FIXED32: (0, 2**32 - 1), F.TYPE_UINT64: (0, 2**64 - 1),
    F.TYPE_FIXED64: (0, 2**64 - 1),
}
BIG = 1_000_000


def text(max_size: int = 60) -> st.SearchStrategy[str]:
    """Strings of mixed scripts, specials and hostile syntax; now and then
    about 1 MB long."""
    small = st.text(st.one_of(st.characters(codec="utf-8", exclude_categories=["Cs"]), st.sampled_from(SPECIAL),
                              st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF)), max_size=max_size)
    hostile = st.sampled_from(HOSTILE)
    huge = st.builds(lambda s, n: (s or "长") * (n // max(1, len((s or "长").encode())) + 1),
                     st.text(max_size=8), st.sampled_from([1024, 65_536, BIG]))
    return st.one_of(small, small, small, hostile, st.just(""), st.just("   \t\n"), huge)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint((number << 3) | wire)


def _zigzag(n: int, bits: int) -> int:
    return (n << 1) ^ (n >> (bits - 1))


def _int_values(kind: int) -> st.SearchStrategy[int]:
    low, high = LIMITS.get(kind, (-(2**63), 2**63 - 1))
    edges = st.sampled_from([low, high, 0, 1, -1, low - 1, high + 1, 2**31, -(2**31) - 1, 2**63 - 1, 101, 5, 6])
    return st.one_of(edges, st.integers(low, high), st.integers(-(2**64), 2**64))


@st.composite
def _scalar_bytes(draw, field: FieldDescriptor, depth: int) -> bytes:
    t, n = field.type, field.number
    if t in (F.TYPE_STRING, F.TYPE_BYTES):
        if t == F.TYPE_STRING and draw(st.integers(0, 9)) == 0:
            data = draw(st.sampled_from([b"a\xed\xa0\x80b", b"\xff\xfe", b"\xc0\xaf", b"ok\x80"]))  # invalid UTF-8
        elif t == F.TYPE_STRING:
            data = draw(text()).encode("utf-8")
        else:
            data = draw(st.binary(max_size=64))
        return _key(n, 2) + _varint(len(data)) + data
    if t == F.TYPE_MESSAGE:
        data = draw(message_bytes(field.message_type, depth - 1)) if depth > 0 else b""
        return _key(n, 2) + _varint(len(data)) + data
    if t == F.TYPE_BOOL:
        return _key(n, 0) + _varint(draw(st.sampled_from([0, 1, 2, 2**40])))
    if t == F.TYPE_ENUM:
        defined = [v.number for v in field.enum_type.values]
        return _key(n, 0) + _varint(draw(st.one_of(st.sampled_from(defined), st.integers(-(2**31), 2**31 - 1))))
    if t == F.TYPE_FLOAT:
        return _key(n, 5) + struct.pack("<f", draw(st.floats(width=32)))
    if t == F.TYPE_DOUBLE:
        return _key(n, 1) + struct.pack("<d", draw(st.floats()))
    value = draw(_int_values(t))
    if t in (F.TYPE_SINT32, F.TYPE_SINT64):
        bits = 32 if t == F.TYPE_SINT32 else 64
        value = _zigzag(max(-(2 ** (bits - 1)), min(2 ** (bits - 1) - 1, value)), bits)
    if t in (F.TYPE_FIXED32, F.TYPE_SFIXED32):
        return _key(n, 5) + struct.pack("<I", value & 0xFFFFFFFF)
    if t in (F.TYPE_FIXED64, F.TYPE_SFIXED64):
        return _key(n, 1) + struct.pack("<Q", value & (2**64 - 1))
    return _key(n, 0) + _varint(value)


@st.composite
def message_bytes(draw, descriptor: Descriptor, depth: int = 2) -> bytes:
    """Wire bytes of a ``descriptor`` message (see the module docstring)."""
    out = bytearray()
    for field in descriptor.fields:
        if field.is_repeated:
            count = draw(st.integers(0, 4))
        else:
            count = draw(st.sampled_from([0, 0, 1, 1, 1, 2]))  # 2: the field sent twice
        for _ in range(count):
            out += draw(_scalar_bytes(field, depth))
    return bytes(out)


# ---------------------------------------------------------------- JSON (REST)


def _json_scalar(field: FieldDescriptor, depth: int) -> st.SearchStrategy:
    t = field.type
    if t == F.TYPE_STRING:
        return st.one_of(text(), st.sampled_from(["\ud800", "a\udfffb"]), st.integers(), st.none())
    if t == F.TYPE_BYTES:
        return st.one_of(st.binary(max_size=200).map(lambda b: __import__("base64").b64encode(b).decode()),
                         st.just("not base64!"), text())
    if t == F.TYPE_MESSAGE:
        if field.message_type.GetOptions().map_entry:
            return st.dictionaries(text(20), st.one_of(text(), st.integers()), max_size=4)
        return json_body(field.message_type, depth - 1) if depth > 0 else st.just({})
    if t == F.TYPE_BOOL:
        return st.one_of(st.booleans(), st.sampled_from(["true", 1, None]))
    if t == F.TYPE_ENUM:
        return st.one_of(st.sampled_from([v.name for v in field.enum_type.values]), st.integers(-5, 2**31), text(20))
    if t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["NaN", "Infinity", 1e308]))
    return st.one_of(_int_values(t), _int_values(t).map(str), st.just(1.5))


@st.composite
def json_body(draw, descriptor: Descriptor, depth: int = 2) -> dict:
    """A REST body for ``descriptor`` (JSON names; values in and out of
    range, wrong types now and then, an unknown field now and then)."""
    body = {}
    for field in descriptor.fields:
        if not draw(st.booleans()):
            continue
        value = _json_scalar(field, depth)
        if field.is_repeated and not (field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry):
            body[field.json_name] = draw(st.lists(value, max_size=4))
        else:
            body[field.json_name] = draw(value)
    if draw(st.integers(0, 9)) == 0:
        body[draw(st.sampled_from(["unknownField", "query ", "__proto__"]))] = 1
    return body


def json_payload(body: dict) -> bytes:
    """``body`` as UTF-8 JSON, lone surrogates kept as JSON escapes."""
    return json.dumps(body, ensure_ascii=True).encode("ascii")


# ---------------------------------------------------------------- JSONL records


@st.composite
def jsonl_records(draw) -> bytes:
    """A JSONL ingest payload: documents, entity and triple records with
    fields of every JSON type, plus lines that are not JSON at all."""
    value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text()),
                         lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text(10), inner, max_size=3)),
                         max_leaves=6)
    keys = st.sampled_from(["id", "text", "title", "heading_path", "metadata", "law", "chapter", "section", "article",
                            "status", "name", "category", "definition", "aliases", "parents", "attributes", "subject",
                            "predicate", "object", "extra"])
    record = st.dictionaries(keys, st.one_of(text(), value), max_size=8)
    line = st.one_of(record.map(lambda r: json.dumps(r, ensure_ascii=draw(st.booleans())).encode("utf-8")),
                     st.binary(max_size=80), st.sampled_from([b"{", b"[]", b"null", b"\"x\"", b"{\"id\": \"\\ud800\"}"]))
    return b"\n".join(draw(st.lists(line, min_size=1, max_size=6)))


#: REST routes with a JSON body: route -> request message name (the gateway's
#: OpenAPI document, services/gateway/static/openapi.json).
REST_BODY_ROUTES = {"/v1/query:search": "SearchRequest", "/v1/query:answer": "AnswerRequest",
                    "/v1/query:answerStream": "AnswerStreamRequest", "/v1/query:deepSearch": "DeepSearchRequest",
                    "/v1/documents:ingest": "IngestRequest", "/v1/documents:import": "IngestRequest",
                    "/v1/entities:search": "SearchEntitiesRequest",
                    "/v1/collections/{collection}/documents:batchDelete": "DeleteDocumentsRequest",
                    "/v1/collections/{collection}/entities/{entity}:merge": "MergeEntitiesRequest",
                    "/v1/collections/{collection}/relations": "CreateRelationRequest",
                    "/v1/collections/{collection}/relations:delete": "DeleteRelationRequest"}
#: REST routes without a body (their input is the path and the query string): route -> methods.
REST_PARAM_ROUTES = {"/v1/collections": ("GET",), "/v1/domainPacks": ("GET",),
                     "/v1/collections/{collection}": ("DELETE",),
                     "/v1/collections/{collection}/documents/{document}": ("GET",),
                     "/v1/collections/{collection}/entities/{entity}": ("GET", "DELETE", "PATCH"),
                     "/v1/collections/{collection}/documents": ("GET",),
                     "/v1/collections/{collection}/entities:export": ("GET",), "/v1/operations": ("GET",),
                     "/v1/operations/{operation}": ("GET", "DELETE"), "/v1/operations/{operation}:cancel": ("POST",)}
#: The resource-name part of a documented route: "collections/{collection}"
#: and what follows it up to a custom verb or the end, or "operations/{operation}".
_RESOURCE_RUN = re.compile(r"collections/\{collection\}(?:/[a-z]+/\{[a-z]+\})?|operations/\{operation\}")


def fill_route(route: str, name: str) -> str:
    """``route`` with its resource-name segments replaced by ``name`` (a
    whole resource name, well formed or not): the URL the transcoder sees.
    An operation's route gets "operations/" and the name's last segment."""
    def fill(match: re.Match) -> str:
        return "operations/" + name.rsplit("/", 1)[-1] if match.group(0).startswith("operations/") else name
    return _RESOURCE_RUN.sub(fill, route, count=1)


#: The routes that are not RPCs (the OpenAI-compatible ones,
#: services/gateway/api/openai_compat/): route -> methods; fuzzed with chat_body().
REST_OPENAI_ROUTES = {"/v1/chat/completions": ("POST",), "/v1/models": ("GET",), "/v1/models/{model}": ("GET",)}


def _json_value() -> st.SearchStrategy:
    return st.one_of(text(), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(),
                     st.sampled_from(["\ud800", [], {}, [1], {"type": "text"}]))


@st.composite
def chat_body(draw) -> dict:
    """A POST /v1/chat/completions body: model names well formed and not,
    messages of every role with string, part-list and wrong-typed content,
    OpenAI's other parameters and GraphMesh's (top_k, filter) with values
    in and out of range, unknown parameters now and then."""
    body: dict = {}
    if draw(st.booleans()):  # a valid request, then perhaps one more parameter of any value
        body = {"model": draw(st.sampled_from(["graphmesh", "graphmesh:default", "graphmesh@fast"])),
                "messages": [{"role": "user", "content": draw(st.sampled_from(["试用期多长？", "What is a patent?"]))}],
                "stream": draw(st.booleans())}
        if draw(st.booleans()):
            body[draw(st.sampled_from(["top_k", "temperature", "user", "filter", "max_tokens"]))] = draw(_json_value())
        return body
    if draw(st.integers(0, 9)):
        body["model"] = draw(st.one_of(
            st.sampled_from(["graphmesh", "graphmesh:default", "graphmesh:a,b@fast", "graphmesh@rerank", "graphmesh:",
                             "graphmesh@", "graphmesh:default,default", "gpt-4o", "", "graphmesh:" + "c," * 30]),
            text(40).map(lambda t: "graphmesh:" + t), _json_value()))
    role = st.one_of(st.sampled_from(["user", "user", "assistant", "system", "developer", "tool"]), _json_value())
    part = st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": text()}),
                     st.fixed_dictionaries({"type": st.sampled_from(["image_url", "text", 5]), "text": _json_value()}),
                     _json_value())
    content = st.one_of(text(), text(), st.lists(part, max_size=3), _json_value())
    message = st.one_of(st.fixed_dictionaries({"role": role, "content": content}), _json_value(),
                        st.fixed_dictionaries({"content": content}))
    if draw(st.integers(0, 9)):
        body["messages"] = draw(st.one_of(st.lists(message, max_size=4), _json_value()))
    extra = st.sampled_from(["stream", "n", "top_k", "filter", "temperature", "max_tokens", "tools", "tool_choice",
                             "response_format", "logprobs", "stream_options", "user", "unknownParam", "__proto__"])
    for _ in range(draw(st.integers(0, 3))):
        name = draw(extra)
        if name == "filter":
            body[name] = draw(st.one_of(st.sampled_from(['year >= 2020', 'status = "现行有效"', "a != b", "x IN ("]), _json_value()))
        elif name in ("n", "top_k"):
            body[name] = draw(st.one_of(st.integers(-2, 200), st.sampled_from([2**63, 1.5, "3"]), _json_value()))
        else:
            body[name] = draw(_json_value())
    return body


def resource_names() -> st.SearchStrategy[str]:
    """Values for a route's {parent} / {name}: well-formed resource names
    and arbitrary text, percent-encoded."""
    from urllib.parse import quote

    return st.one_of(
        st.sampled_from(["collections/-", "collections/default", "collections/default/documents/第十条",
                         "collections/default/entities/马铃薯", "collections/-/entities/x", "collections/default/entities/",
                         "collections/-/documents/x", "collections/%2e%2e", "collections//documents/"]),
        st.text(max_size=80).map(lambda t: "collections/" + quote(t, safe="/")),
        st.text(max_size=40).map(lambda t: quote(t, safe="")),
    )


def query_params() -> st.SearchStrategy[dict]:
    """Query strings for the routes without a body: known and unknown
    parameters with text (up to about 9 KB once percent-encoded: past
    the HTTP server's line limit, within the client's), integers at any
    size and special values."""
    small = st.text(st.one_of(st.characters(codec="utf-8", exclude_categories=["Cs"]), st.sampled_from(SPECIAL)),
                    max_size=60)
    return st.dictionaries(st.sampled_from(["pageSize", "pageToken", "filter", "page_size", "x"]),
                           st.one_of(small, st.sampled_from(HOSTILE), st.just("长" * 1000), st.integers().map(str),
                                     st.sampled_from(["-1", "0", "1001", "1e999", "NaN", "\x00"])),
                           max_size=3)

