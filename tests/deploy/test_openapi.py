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
    assert others == {("POST", openai_chat.CHAT_PATH), ("GET", openai_chat.MODELS_PATH)}
    chat = doc["paths"][openai_chat.CHAT_PATH]["post"]
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert {"400", "401", "404", "429"} <= set(chat["responses"]) and "Retry-After" in chat["responses"]["429"]["headers"]
    request = doc["components"]["schemas"]["openai.ChatCompletionRequest"]
    assert set(request["properties"]) == openai_chat.KNOWN_PARAMS  # what the route accepts, no more
    body = {"model": "graphmesh", "messages": [{"role": "user", "content": "问题"}], "top_k": 5}
    jsonschema.Draft4Validator({**request, "components": doc["components"]}).validate(body)


def test_one_operation_per_transcoded_route_with_request_and_reply_schemas(doc):
    documented = {(verb.upper(), path, op["operationId"].split("_", 1)[1]) for path, item in rpc_paths(doc).items() for verb, op in item.items()}
    # path variables appear as {name}, their pattern (collections/*) in the template only; the
    # Operations routes keep their literal prefix (/v1/{name} is GetDocument's): operations/{operation}
    operations = set(SERVICES[1].methods_by_name)
    plain = {(verb, re.sub(r"\{([^}=]+)=[^}]*\}", r"{\1}", path), rpc) for verb, path, rpc in http_routes() if rpc not in operations}
    hoisted = {(verb, re.sub(r"\{name=operations(/\*\*)?\}", lambda m: "operations" + ("/{operation}" if m.group(1) else ""), path), rpc)
               for verb, path, rpc in http_routes() if rpc in operations}
    assert documented == plain | hoisted and ("GET", "/v1/operations", "ListOperations") in hoisted
    services = {s.name: s for s in SERVICES}
    for path, item in rpc_paths(doc).items():
        for op in item.values():
            tag, rpc = op["operationId"].split("_", 1)
            method = services[tag].methods_by_name[rpc]
            if "requestBody" in op:
                assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/" + method.input_type.full_name)
            else:  # GET / DELETE: every request field is a path or query parameter
                given = {p.get("x-field", p["name"]) for p in op["parameters"] if p["in"] in ("path", "query")}
                if method.name == "ListOperations":
                    given.add("name")  # fixed by the path: /v1/{name=operations}
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
