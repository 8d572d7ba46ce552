#!/usr/bin/env python3
"""Generates the gateway's OpenAPI 3 document from its proto: the routes from
the ``google.api.http`` annotations, the request/response schemas from the
message descriptors under the proto3 JSON mapping (lowerCamelCase names,
64-bit integers as strings, enums as their value names, bytes as base64), the
descriptions from the proto comments.

    python scripts/gen_openapi.py          # writes services/gateway/static/openapi.json
    python scripts/gen_openapi.py --check  # exit 1 when the committed file is stale

Descriptors (with comments) come from grpc_tools' protoc over protos/ and
third_party/googleapis, as scripts/gen_protos.sh compiles them.

The gateway's routes that are not RPCs are added from the modules that serve
them, which describe themselves: the OpenAI-compatible POST
/v1/chat/completions and GET /v1/models (services/gateway/api/openai_compat/:
openapi_paths, OPENAPI_SCHEMAS as "openai.<name>", tag "OpenAI"). The console's
GET / and GET /v1/stages:summary are left out (a page, and an operator view
of this process's metrics).
"""
from __future__ import annotations

import argparse
import importlib.resources
import json
import re
import sys
import tempfile
import tomllib
from pathlib import Path

from google.api import annotations_pb2
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "services" / "gateway" / "static" / "openapi.json"
PROTO = "graphmesh/gateway/v1/gateway.proto"
SERVICE = "graphmesh.gateway.v1.GatewayService"
#: The services transcoded, by full name -> tag (services/gateway/api/rest_routes.py).
SERVICES = {SERVICE: "GatewayService", "google.longrunning.Operations": "Operations"}
F = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    F.TYPE_DOUBLE: {"type": "number", "format": "double"}, F.TYPE_FLOAT: {"type": "number", "format": "float"},
    F.TYPE_INT32: {"type": "integer", "format": "int32"}, F.TYPE_SINT32: {"type": "integer", "format": "int32"},
    F.TYPE_SFIXED32: {"type": "integer", "format": "int32"}, F.TYPE_UINT32: {"type": "integer", "format": "uint32", "minimum": 0},
    F.TYPE_FIXED32: {"type": "integer", "format": "uint32", "minimum": 0},
    # proto3 JSON: 64-bit integers are JSON strings (numbers are accepted on input).
    F.TYPE_INT64: {"type": "string", "format": "int64"}, F.TYPE_SINT64: {"type": "string", "format": "int64"},
    F.TYPE_SFIXED64: {"type": "string", "format": "int64"}, F.TYPE_UINT64: {"type": "string", "format": "uint64"},
    F.TYPE_FIXED64: {"type": "string", "format": "uint64"},
    F.TYPE_BOOL: {"type": "boolean"}, F.TYPE_STRING: {"type": "string"},
    F.TYPE_BYTES: {"type": "string", "format": "byte", "description": "base64"},
}
WELL_KNOWN = {
    ".google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    ".google.protobuf.Duration": {"type": "string", "pattern": r"^-?\d+(\.\d+)?s$"},
    ".google.protobuf.FieldMask": {"type": "string"},
    ".google.protobuf.Struct": {"type": "object", "additionalProperties": True},
    ".google.protobuf.Value": {}, ".google.protobuf.ListValue": {"type": "array", "items": {}},
    ".google.protobuf.Empty": {"type": "object"}, ".google.protobuf.Any": {"type": "object", "required": ["@type"]},
}


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """The gateway proto and its imports, with source comments."""
    well_known = importlib.resources.files("grpc_tools") / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "gateway.pb"
        code = protoc.main(["protoc", f"-I{ROOT / 'protos'}", f"-I{ROOT / 'third_party' / 'googleapis'}", f"-I{well_known}",
                            "--include_imports", "--include_source_info", f"--descriptor_set_out={out}", PROTO])
        if code != 0:
            raise SystemExit(f"protoc failed ({code}) on {PROTO}")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _clean(comment: str) -> str:
    return re.sub(r"\s*\n\s*", " ", comment.strip())


class Builder:
    """Walks the descriptors into OpenAPI schemas (only those reachable)."""

    def __init__(self, fds: descriptor_pb2.FileDescriptorSet) -> None:
        self.messages: dict[str, tuple[descriptor_pb2.DescriptorProto, dict]] = {}
        self.enums: dict[str, tuple[descriptor_pb2.EnumDescriptorProto, dict]] = {}
        self.methods: dict[str, tuple[descriptor_pb2.MethodDescriptorProto, str, str]] = {}
        self.schemas: dict[str, dict] = {}
        self.requests: set[str] = set()
        for file in fds.file:
            comments = {tuple(loc.path): _clean(loc.leading_comments) for loc in file.source_code_info.location if loc.leading_comments}
            self._index(file.package, file.message_type, file.enum_type, (), comments)
            for s_index, service in enumerate(file.service):
                tag = SERVICES.get(f"{file.package}.{service.name}")
                if tag is not None:
                    for m_index, method in enumerate(service.method):
                        self.methods[method.name] = (method, comments.get((6, s_index, 2, m_index), ""), tag)
                        self.requests.add(method.input_type)
        self.inputs = self._reachable(self.requests)

    def _reachable(self, roots: set[str]) -> set[str]:
        """The message types ``roots`` hold, at any depth (map entries and well-known types excluded)."""
        seen, todo = set(), list(roots)
        while todo:
            name = todo.pop()
            if name in seen or name not in self.messages or name in WELL_KNOWN:
                continue
            seen.add(name)
            todo += [f.type_name for f in self.messages[name][0].field if f.type == F.TYPE_MESSAGE]
        return {name for name in seen if not self.messages[name][0].options.map_entry}

    def _index(self, scope: str, messages, enums, path: tuple, comments: dict) -> None:
        for i, enum in enumerate(enums):
            p = (*path, 4, i) if path else (5, i)
            self.enums[f".{scope}.{enum.name}"] = (enum, {k[len(p):]: v for k, v in comments.items() if k[: len(p)] == p})
        for i, msg in enumerate(messages):
            p = (*path, 3, i) if path else (4, i)
            self.messages[f".{scope}.{msg.name}"] = (msg, {k[len(p):]: v for k, v in comments.items() if k[: len(p)] == p})
            self._index(f"{scope}.{msg.name}", msg.nested_type, msg.enum_type, p, comments)

    def ref(self, type_name: str) -> dict:
        """A $ref to the schema of message or enum ``type_name`` (".pkg.Name"), building it once."""
        if type_name in WELL_KNOWN:
            return dict(WELL_KNOWN[type_name])
        key = type_name.lstrip(".")
        if key not in self.schemas:
            self.schemas[key] = {}
            self.schemas[key] = self._enum(type_name) if type_name in self.enums else self._message(type_name)
        return {"$ref": f"#/components/schemas/{key}"}

    def _enum(self, type_name: str) -> dict:
        enum, comments = self.enums[type_name]
        values = [v.name for v in enum.value]
        described = "; ".join(f"{v.name}: {comments[(2, i)]}" for i, v in enumerate(enum.value) if (2, i) in comments)
        return {"type": "string", "enum": values, "description": " ".join(x for x in (comments.get((), ""), described) if x)}

    def field_schema(self, field: descriptor_pb2.FieldDescriptorProto) -> dict:
        """The proto3 JSON schema of one field: scalar, $ref, array or map (object)."""
        if field.type in (F.TYPE_MESSAGE, F.TYPE_ENUM):
            entry = self.messages.get(field.type_name, (None,))[0]
            if entry is not None and entry.options.map_entry:
                value = next(f for f in entry.field if f.name == "value")
                return {"type": "object", "additionalProperties": self.field_schema(value)}
            schema = self.ref(field.type_name)
        else:
            schema = dict(SCALARS[field.type])
        if field.label == F.LABEL_REPEATED:
            return {"type": "array", "items": schema}
        return schema

    def _message(self, type_name: str) -> dict:
        msg, comments = self.messages[type_name]
        properties = {}
        for i, field in enumerate(msg.field):
            schema = self.field_schema(field)
            notes = [comments.get((2, i), "")]
            if field.HasField("oneof_index") and not field.proto3_optional:
                group = msg.oneof_decl[field.oneof_index].name
                others = [f.json_name for f in msg.field if f.HasField("oneof_index") and f.oneof_index == field.oneof_index]
                notes.append(f"(oneof {group}: at most one of {', '.join(others)})")
            description = " ".join(n for n in notes if n)
            if description:
                schema = {"allOf": [schema], "description": description} if "$ref" in schema else {**schema, "description": (schema.get("description", "") + " " + description).strip()}
            properties[field.json_name] = schema
        out = {"type": "object", "properties": properties}
        if type_name in self.inputs:  # the transcoder rejects unknown fields anywhere in a request
            out["additionalProperties"] = False
        if comments.get(()):
            out["description"] = comments[()]
        return out


def _segment_name(collection: str, variable: str, taken: list[str]) -> str:
    """The parameter name of a "*" segment after the literal ``collection``
    ("collections" -> "collection", "entities" -> "entity"), or
    ``variable``_n when there is no such literal or the name is taken."""
    singular = collection[:-3] + "y" if collection.endswith("ies") else collection[:-1] if collection.endswith("s") else ""
    if singular and singular.isidentifier() and singular not in taken:
        return singular
    return f"{variable}_{len(taken) + 1}"


def _path_and_params(template: str) -> tuple[str, list[dict], set[str]]:
    """(OpenAPI path, its path parameters, the request fields they fill) of
    a google.api.http template. A resource-name variable is written out as
    its segments, because an OpenAPI path parameter cannot hold "/":
    "/v1/{name=collections/*/documents/**}" becomes
    "/v1/collections/{collection}/documents/{document}", whose URL is the
    one the gateway serves; a plain "{name}" stays as it is."""
    params: list[dict] = []
    fields: set[str] = set()

    def expand(match: re.Match) -> str:
        variable, _, pattern = match.group(1).partition("=")
        fields.add(variable)
        if not pattern:
            params.append({"name": variable, "in": "path", "required": True, "schema": {"type": "string"}})
            return "{" + variable + "}"
        parts = pattern.split("/")
        out = []
        for i, part in enumerate(parts):
            if part not in ("*", "**"):
                out.append(part)
                continue
            name = _segment_name(parts[i - 1] if i else "", variable, [p["name"] for p in params])
            params.append({"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1},
                           "description": f"a segment of the request's `{variable}` ({pattern})"})
            out.append("{" + name + "}")
        return "/".join(out)

    return re.sub(r"\{([^}]+)\}", expand, template), params, fields


ERROR = {"type": "object", "description": "google.rpc.Status as JSON; code is the HTTP status (AIP-193 mapping of the gRPC code).",
         "properties": {"error": {"type": "object", "properties": {
             "code": {"type": "integer"}, "status": {"type": "string", "description": "gRPC status code name, e.g. INVALID_ARGUMENT"},
             "message": {"type": "string"},
             "details": {"type": "array", "items": {"type": "object", "description": "e.g. google.rpc.BadRequest with fieldViolations",
                                                     "properties": {"@type": {"type": "string"}}, "additionalProperties": True}}}}}}


def extra_routes() -> tuple[dict, dict]:
    """(paths, schemas) of the routes that are not RPCs (module docstring),
    imported from this checkout (not an installed copy)."""
    for path in (ROOT / "gen" / "python", ROOT):
        if str(path) not in sys.path[:2]:
            sys.path.insert(0, str(path))
    from services.gateway.api import openai_compat as openai_chat

    return openai_chat.openapi_paths(), {f"openai.{name}": schema for name, schema in openai_chat.OPENAPI_SCHEMAS.items()}


def build() -> dict:
    """The OpenAPI document as a dict."""
    b = Builder(descriptor_set())
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    error = {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    extra_paths, extra_schemas = extra_routes()  # also puts the repository on sys.path
    from services.gateway.api.edge_rules import TIMEOUT_HEADER as timeout_header
    paths: dict[str, dict] = {}
    for name, (method, comment, tag) in b.methods.items():
        rule = method.options.Extensions[annotations_pb2.http]
        verb = rule.WhichOneof("pattern")
        if verb is None or verb == "custom":
            continue
        path, params, path_fields = _path_and_params(getattr(rule, verb))
        request = b.ref(method.input_type)
        reply = b.ref(method.output_type)
        if method.server_streaming:
            event = {"schema": reply}
            ok = {"description": f"A stream of {method.output_type.lstrip('.')} events: server-sent events (Accept: text/event-stream; "
                                 "each `data:` line one event) or JSON lines; an error after the first event arrives as a last "
                                 "{\"error\": ...} event.",
                  "content": {"text/event-stream": event, "application/x-ndjson": event}}
        else:
            ok = {"description": "OK (fields at their default value are omitted)", "content": {"application/json": {"schema": reply}}}
        params.append(dict(timeout_header))
        operation = {
            "operationId": f"{tag}_{name}", "tags": [tag],
            "summary": comment.split(". ")[0].rstrip(".") + "." if comment else name, "description": comment,
            "parameters": params,
            "responses": {"200": ok, "400": dict(error, description="INVALID_ARGUMENT: a google.rpc.BadRequest names the field"),
                          "401": dict(error, description="UNAUTHENTICATED: no valid API key (when keys are required)"),
                          "429": dict(error, description="RESOURCE_EXHAUSTED: the key's rate limit; retry after Retry-After seconds",
                                      headers={"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}),
                          "default": error},
        }
        if rule.body:
            body = request if rule.body == "*" else b.field_schema(next(f for f in b.messages[method.input_type][0].field if f.name == rule.body))
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        else:  # the request's other fields travel as query parameters
            message, comments = b.messages[method.input_type]
            in_path = set(path_fields)
            for i, field in enumerate(message.field):
                if field.name not in in_path:
                    params.insert(len(params) - 1, {"name": field.json_name, "in": "query", "required": False,
                                                    "schema": b.field_schema(field), "description": comments.get((2, i), "")})
                    in_path.add(field.name)
        paths.setdefault(path, {})[verb] = operation
    paths.update(extra_paths)
    return {
        "openapi": "3.0.3",
        "info": {"title": "GraphMesh Gateway API", "version": version,
                 "description": f"REST/JSON transcoding of {SERVICE} and google.longrunning.Operations (proto3 JSON mapping: lowerCamelCase field names, "
                                "64-bit integers as strings, enums as value names, bytes as base64; unknown fields are rejected). "
                                f"Generated from {PROTO} by scripts/gen_openapi.py."},
        "servers": [{"url": "/", "description": "the gateway serving this document, on whatever host and port it answers"}],
        "security": [{}, {"bearer": []}, {"apiKey": []}],
        "tags": [{"name": "GatewayService", "description": "Search, answers, deep search, ingestion and entity search."},
                 {"name": "Operations", "description": "google.longrunning.Operations: the long-running ImportDocuments "
                                                       "operations (AIP-151)."},
                 {"name": "OpenAI", "description": "OpenAI-compatible chat completions and models (not RPCs; "
                                                   "services/gateway/api/openai_compat/)."}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": {"Error": ERROR, **dict(sorted(b.schemas.items())), **dict(sorted(extra_schemas.items()))},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "API key as `authorization: Bearer KEY` (when keys are required)"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key", "description": "API key (when keys are required)"},
            },
        },
    }


def render() -> str:
    """The document as committed (2-space JSON, UTF-8, trailing newline)."""
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when the committed document is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run `make openapi` and commit", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
