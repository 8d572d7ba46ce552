"""services/gateway/static/openapi.json: fresh, a valid OpenAPI 3.0 document,
one operation per REST route the transcoder serves, and schemas that follow
the proto3 JSON mapping of the compiled descriptors (checked here from
gateway_pb2, independently of the generator's protoc run). Replies of the
real services are validated against it in test_live_mesh.py."""
from __future__ import annotations

import importlib.util
import json
import re
import sys

import jsonschema
import pytest
from google.api import annotations_pb2
from google.protobuf.descriptor import FieldDescriptor

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.api.rest import http_routes
from services.gateway.api.rest_routes import SERVICES
from tests.deploy.manifests import REPO, SCHEMAS

DOC = REPO / "services" / "gateway" / "static" / "openapi.json"


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(DOC.read_text())


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_openapi", REPO / "scripts" / "gen_openapi.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_committed_document_is_fresh():
    assert DOC.read_text(encoding="utf-8") == load_generator().render(), "run `make openapi` and commit"


def test_document_is_valid_openapi_3_0(doc):
    schema = json.loads((SCHEMAS / "openapi-3.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate({**doc, "paths": {"v1/no-leading-slash": {}}})


RPC_TAGS = (["GatewayService"], ["Operations"])


def rpc_paths(doc: dict) -> dict:
    """The path items of the transcoded RPCs (tags GatewayService, Operations)."""
    return {path: {verb: op for verb, op in item.items() if op["tags"] in RPC_TAGS}
            for path, item in doc["paths"].items() if any(op["tags"] in RPC_TAGS for op in item.values())}


def test_the_routes_that_are_not_rpcs_are_the_openai_ones_as_served(doc):
    from services.gateway.api import openai_compat as openai_chat

    others = {(verb.upper(), path) for path, item in doc["paths"].items() for verb, op in item.items() if op["tags"] not in RPC_TAGS}
    assert others == {("POST", openai_chat.CHAT_PATH), ("GET", openai_chat.MODELS_PATH), ("GET", openai_chat.MODELS_PATH + "/{model}")}
    chat = doc["paths"][openai_chat.CHAT_PATH]["post"]
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert {"400", "401", "404", "429"} <= set(chat["responses"]) and "Retry-After" in chat["responses"]["429"]["headers"]
    request = doc["components"]["schemas"]["openai.ChatCompletionRequest"]
    assert set(request["properties"]) == openai_chat.KNOWN_PARAMS  # what the route accepts, no more
    body = {"model": "graphmesh", "messages": [{"role": "user", "content": "问题"}], "top_k": 5}
    jsonschema.Draft4Validator({**request, "components": doc["components"]}).validate(body)


def test_one_operation_per_transcoded_route_with_request_and_reply_schemas(doc):
    documented = {(verb.upper(), path, op["operationId"].split("_", 1)[1]) for path, item in rpc_paths(doc).items() for verb, op in item.items()}
    # A resource-name variable is written out as its segments (an OpenAPI
    # path parameter cannot hold "/"): {name=collections/*/entities/**} ->
    # collections/{collection}/entities/{entity}.
    def segments(match: re.Match) -> str:
        parts = match.group(1).split("/")
        return "/".join("{" + parts[i - 1].removesuffix("s").replace("entitie", "entity") + "}" if part in ("*", "**") else part
                        for i, part in enumerate(parts))

    assert documented == {(verb, re.sub(r"\{[^}=]+=([^}]*)\}", segments, path), rpc) for verb, path, rpc in http_routes()}
    assert "/v1/collections/{collection}/documents/{document}" in doc["paths"]  # the URL a client sends
    services = {s.name: s for s in SERVICES}
    for path, item in rpc_paths(doc).items():
        for op in item.values():
            tag, rpc = op["operationId"].split("_", 1)
            method = services[tag].methods_by_name[rpc]
            if "requestBody" in op:
                assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/" + method.input_type.full_name)
            else:  # GET / DELETE: every request field is a path or query parameter
                rule = method.GetOptions().Extensions[annotations_pb2.http]
                in_path = set(re.findall(r"\{([^}=]+)", getattr(rule, rule.WhichOneof("pattern"))))
                given = {p["name"] for p in op["parameters"] if p["in"] == "query"} | in_path
                assert given == {f.json_name if f.json_name in given else f.name for f in method.input_type.fields}
            replies = op["responses"]["200"]["content"]
            if method.output_type.full_name == "google.protobuf.Empty":  # a well-known type: inlined
                assert [c["schema"] for c in replies.values()] == [{"type": "object"}]
            else:
                assert {c["schema"]["$ref"] for c in replies.values()} == {f"#/components/schemas/{method.output_type.full_name}"}
            assert ("text/event-stream" in replies) == method.server_streaming
            assert {"400", "401", "429"} <= set(op["responses"]) and "Retry-After" in op["responses"]["429"]["headers"]
            assert op["description"]  # from the proto comment


#: Well-known types in the proto3 JSON mapping: inlined, not referenced.
WELL_KNOWN = {"google.protobuf.Timestamp": {"type": "string", "format": "date-time"}, "google.protobuf.Any": {"type": "object"}}


def _expected(field: FieldDescriptor) -> dict:
    t = FieldDescriptor
    if field.type == t.TYPE_ENUM:
        return {"$ref": f"#/components/schemas/{field.enum_type.full_name}"}
    if field.type == t.TYPE_MESSAGE and field.message_type.full_name == "google.protobuf.FieldMask":
        return {"type": "string"}  # proto3 JSON: "category,aliases"
    if field.type == t.TYPE_MESSAGE:
        return WELL_KNOWN.get(field.message_type.full_name, {"$ref": f"#/components/schemas/{field.message_type.full_name}"})
    if field.type in (t.TYPE_INT64, t.TYPE_UINT64, t.TYPE_SINT64, t.TYPE_FIXED64, t.TYPE_SFIXED64):
        return {"type": "string"}
    if field.type == t.TYPE_BYTES:
        return {"type": "string", "format": "byte"}
    if field.type in (t.TYPE_DOUBLE, t.TYPE_FLOAT):
        return {"type": "number"}
    if field.type == t.TYPE_BOOL:
        return {"type": "boolean"}
    if field.type == t.TYPE_STRING:
        return {"type": "string"}
    return {"type": "integer"}


def test_schemas_follow_the_proto3_json_mapping(doc):
    schemas = doc["components"]["schemas"]
    pool = gateway_pb2.DESCRIPTOR.pool
    checked = 0
    for name, schema in schemas.items():
        if name == "Error" or name.startswith("openai."):  # the OpenAI routes' own shapes, not proto messages
            continue
        if schema.get("enum"):
            enum = pool.FindEnumTypeByName(name)
            assert schema["enum"] == [v.name for v in enum.values] and schema["type"] == "string"
            continue
        message = pool.FindMessageTypeByName(name)
        assert list(schema["properties"]) == [f.json_name for f in message.fields], name
        for field in message.fields:
            prop = schema["properties"][field.json_name]
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                assert prop["type"] == "object" and "additionalProperties" in prop, f"{name}.{field.name}"
                continue
            if field.is_repeated:
                assert prop["type"] == "array", f"{name}.{field.name}"
                prop = prop["items"]
            prop = prop["allOf"][0] if "allOf" in prop else prop
            expected = _expected(field)
            assert {k: prop.get(k) for k in expected} == expected, f"{name}.{field.name}: {prop}"
            checked += 1
    assert checked > 50
    assert "topK" in schemas["graphmesh.gateway.v1.SearchRequest"]["properties"]  # lowerCamelCase, not top_k


def _held_messages(descriptor, seen=None) -> set:
    seen = set() if seen is None else seen
    for field in descriptor.fields:
        inner = field.message_type
        if inner is not None and not inner.GetOptions().map_entry and inner.file.package.startswith("graphmesh") \
                and inner.full_name not in seen:
            seen.add(inner.full_name)
            _held_messages(inner, seen)
    return seen


def test_every_message_a_request_holds_is_closed_as_the_transcoder_is(doc):
    # Regression (issue 26, schemathesis): only the top-level request schemas
    # had additionalProperties false; an unknown field in a nested message
    # (SearchRequest.filters[0]) was schema-valid but answered 400.
    from google.protobuf import json_format

    held = set()
    methods = {m.name: m for service in SERVICES for m in service.methods}
    for name in {r[2] for r in http_routes()}:
        held |= _held_messages(methods[name].input_type)
    assert "graphmesh.common.v1.MetadataFilter" in held
    for name in held:
        assert doc["components"]["schemas"][name].get("additionalProperties") is False, name
    with pytest.raises(json_format.ParseError, match="no field named"):
        json_format.Parse('{"query": "x", "filters": [{"key": "a", "equals": "b", "extra": 1}]}', gateway_pb2.SearchRequest())


@pytest.mark.parametrize("value", ["1e-9", "0.5", "86400", "0", "-1", "86400.5", "1e999"])
def test_the_declared_timeout_header_matches_what_the_edge_accepts(doc, value):
    # Regression (issue 26, schemathesis): X-Timeout-Seconds was declared as
    # any number; the edge refuses all but (0, 86400].
    from services.gateway.api.edge_rules import request_timeout

    for item in doc["paths"].values():
        for operation in item.values():
            header = next(p for p in operation["parameters"] if p["name"] == "X-Timeout-Seconds")
            declared = jsonschema.Draft4Validator(header["schema"]).is_valid(float(value))
            assert declared == (request_timeout({"X-Timeout-Seconds": value})[1] is None), (value, header["schema"])


def test_the_server_is_the_one_serving_the_document(doc):
    """A relative server URL: the REST port is configurable and a proxy may
    sit in front, so a fixed http://127.0.0.1:8080 sent tools that read the
    document (Swagger UI, schemathesis, code generators) to the wrong place."""
    assert [server["url"] for server in doc["servers"]] == ["/"]
