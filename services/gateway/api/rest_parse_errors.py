"""The field a REST body's JSON parse error is about, and its description
without Python's own words: json_format names the JSON field and a Python
type error where the servicers name proto field paths
(google.rpc.BadRequest field violations). Pure; used by rest.py."""
from __future__ import annotations

import re
from functools import cache
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from graphmesh.common.v1 import types_pb2

_FAILED_FIELD = re.compile(r"Failed to parse (\w+) field")


def field_of(parse_error: str, descriptor: Descriptor) -> str:
    """The request field a json_format parse error is about, by its proto
    names (``top_k`` whether the body said ``topK`` or ``top_k``; a nested
    one as a dotted path, ``files.content``, ``filters[0]``), as the
    servicers name fields in their own errors (google.rpc.BadRequest: a
    field path of proto field names); "body" when none is named."""
    duplicate = _DUPLICATE_KEY.search(parse_error)
    if duplicate:
        return proto_field_name(duplicate.group(1), descriptor)
    at = _AT_PATH.search(parse_error)
    path = ".".join(proto_field_name(part.split("[", 1)[0], descriptor) + ("[" + part.split("[", 1)[1] if "[" in part else "")
                    for part in at.group(1).split(".")) if at else ""
    marker = 'has no field named "'
    if marker in parse_error:  # an unknown field, under the path where it was found
        unknown = parse_error.split(marker, 1)[1].split('"', 1)[0]
        return f"{path}.{unknown}" if path else unknown
    if path:
        return path
    failed = [name for name in _FAILED_FIELD.findall(parse_error) if not name.isdigit()]
    if failed:
        return ".".join(proto_field_name(name, descriptor) for name in failed)
    if 'for field "' in parse_error.lower():
        return proto_field_name(parse_error.lower().split('for field "', 1)[1].split('"', 1)[0], descriptor)
    return "body"


def parse_description(parse_error: str) -> str:
    """json_format's message without Python's own words for a wrong JSON
    type ("object of type 'int' has no len()"); an unknown field is said as
    the query-parameter routes say it, "is not a field of this request",
    with the fields that message has (protobuf's "Message type ... has no
    field named ... Available Fields(except extensions)" otherwise); a key
    given twice is said so (json_format: "Failed to load JSON: Failed to
    load JSON: duplicate key query..")."""
    if _DUPLICATE_KEY.search(parse_error):
        return "is given more than once in the JSON object: give it once"
    oneof = _ONEOF_TWICE.search(parse_error)
    if oneof:
        names = [f.json_name for f in _ONEOF_FIELDS.get(oneof.group(1), ())]
        return f"sets more than one of {', '.join(names) or oneof.group(1)}: give exactly one"
    unknown = _UNKNOWN_FIELD.search(parse_error)
    if unknown:
        fields = ", ".join(re.findall(r"'([A-Za-z0-9_]+)'", unknown.group(1)))
        return f"is not a field of this request; its fields: {fields}" if fields else "is not a field of this request"
    text = re.sub(r"(Failed to load JSON: )+", "Failed to load JSON: ", parse_error)
    text = _PYTHON_TYPE_ERROR.sub("the value has the wrong JSON type (a string is expected)", text)
    return re.sub(r"\.{2,}$", ".", _PYTHON_INT_ERROR.sub(r"not an integer: \1", text).strip())


#: json_format's "Failed to load JSON: Failed to load JSON: duplicate key query.." (its message, wrapped twice).
_DUPLICATE_KEY = re.compile(r"duplicate key (\S+?)\.*$")
#: protobuf's 'Message type "...MetadataFilter" should not have multiple "condition" oneof fields'.
_ONEOF_TWICE = re.compile(r'should not have multiple "(\w+)" oneof fields')
#: The fields of each oneof of the request messages a REST body may hold, by oneof name (only
#: MetadataFilter.condition today), for the message that names them.
_ONEOF_FIELDS = {o.name: o.fields for o in types_pb2.MetadataFilter.DESCRIPTOR.oneofs}
#: json_format's "... at SearchRequest.rerank" / "at \"SearchRequest.filters[0]\"": the field path after the message name.
_AT_PATH = re.compile(r' at "?[A-Za-z0-9_]+\.([A-Za-z0-9_\[\]]+(?:\.[A-Za-z0-9_\[\]]+)*)')
_UNKNOWN_FIELD = re.compile(r'has no field named "[^"]*".*?Available Fields\(except extensions\): "\[(.*?)\]"', re.S)
_PYTHON_TYPE_ERROR = re.compile(r"object of type '\w+' has no len\(\)|expected string or bytes-like object(?:, got '\w+')?\.*")
_PYTHON_INT_ERROR = re.compile(r"invalid literal for int\(\) with base 10: ('.*?')")


def proto_field_name(name: str, descriptor: Descriptor) -> str:
    """``name``'s proto field name in ``descriptor`` or a message under it
    (its JSON name matched, first found breadth-first); ``name`` unchanged
    when no field has it."""
    queue, seen = [descriptor], set()
    while queue:
        message = queue.pop(0)
        if message.full_name in seen:
            continue
        seen.add(message.full_name)
        for field in message.fields:
            if name in (field.name, field.json_name):
                return field.name
            if field.message_type is not None:
                queue.append(field.message_type)
    return name


#: Field types a JSON string carries (bytes as base64).
_STRING_TYPES = (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES)
#: What proto3's JSON mapping accepts for bytes: standard or URL-safe base64, padding optional; json_format
#: itself skips any other character ("aGVsbG8g*d29y!bGQ=" read as "hello world"), so a body is checked first.
_BASE64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")
_WHITESPACE = re.compile(r"\s+")


def base64_error(value: str) -> str | None:
    """Why ``value`` is not base64 as proto3's JSON mapping reads bytes
    (standard or URL-safe alphabet, at most two "=" of padding, line breaks
    allowed: ``base64`` wraps its output), or None when it is."""
    squeezed = _WHITESPACE.sub("", value)
    body = squeezed.rstrip("=")
    if len(squeezed) - len(body) > 2:
        return "must be base64: more than two '=' of padding at its end"
    bad = next(((i, c) for i, c in enumerate(body) if c not in _BASE64_ALPHABET), None)
    if bad is not None:
        return f"must be base64 (standard or URL-safe alphabet): {bad[1]!r} at character {bad[0]} is not"
    if len(body) % 4 == 1:
        return f"must be base64: {len(body)} characters leave one over (a character missing or extra)"
    return None


@cache
def carries_bytes(descriptor: Descriptor) -> bool:
    """Whether a ``descriptor`` message or any message under it has a bytes field (whose base64 a body
    parse must check with ``shape_error``)."""
    queue, seen = [descriptor], set()
    while queue:
        message = queue.pop()
        if message.full_name in seen:
            continue
        seen.add(message.full_name)
        for field in message.fields:
            if field.type == FieldDescriptor.TYPE_BYTES:
                return True
            if field.message_type is not None:
                queue.append(field.message_type)
    return False


def shape_error(body: Any, descriptor: Descriptor, path: str = "") -> tuple[str, str] | None:
    """(field path, description) of the first value of ``body`` (a parsed
    JSON object for a ``descriptor`` message) that should be a JSON object,
    an array or a string and is not: json_format reads a
    string given for a message field character by character and names the
    first character as an unknown field ("filters[0].any_of.u"); None when
    every message field holds an object, and a bytes field holds base64
    (``base64_error``). Paths use proto field names, with
    [i] for a repeated field's elements. Fields of google.protobuf types
    (which take other JSON values) and unknown keys are left to json_format."""
    if not isinstance(body, dict):
        return None
    fields = {f.name: f for f in descriptor.fields} | {f.json_name: f for f in descriptor.fields}
    for key, value in body.items():
        field = fields.get(key)
        if field is not None and field.type in _STRING_TYPES and value is not None:
            # json_format names the string field a number was given for without its path
            # ("filters.gte: ... expected string or bytes-like object, got 'int'"; "files.content")
            name = f"{path}.{field.name}" if path else field.name
            what = "a JSON string" + (" (base64)" if field.type == FieldDescriptor.TYPE_BYTES else
                                      ' ("10"; bounds that are all numbers compare as numbers)'
                                      if descriptor.full_name == types_pb2.MetadataRange.DESCRIPTOR.full_name else "")
            if field.is_repeated and not isinstance(value, list):
                return name, f"must be a JSON array of strings, got {_kind(value)}"
            for where, element in ([(f"{name}[{i}]", v) for i, v in enumerate(value)] if field.is_repeated else [(name, value)]):
                if not isinstance(element, str):
                    return where, f"must be {what}, got {_kind(element)}"
                if field.type == FieldDescriptor.TYPE_BYTES and (bad := base64_error(element)):
                    return where, bad
            continue
        if field is None or field.message_type is None or value is None \
                or field.message_type.full_name.startswith("google.protobuf."):
            continue
        name = f"{path}.{field.name}" if path else field.name
        if field.message_type.GetOptions().map_entry:
            if not isinstance(value, dict):
                return name, f"must be a JSON object of keys and values, got {_kind(value)}"
            if field.message_type.fields_by_name["value"].type == FieldDescriptor.TYPE_STRING:
                # json_format: "Failed to parse metadata field: ... (a string is expected)", no key named
                bad = next(((k, v) for k, v in value.items() if v is not None and not isinstance(v, str)), None)
                if bad is not None:
                    return f"{name}.{bad[0]}", f"must be a JSON string, got {_kind(bad[1])}"
            continue
        elements = [(name, value)]
        if field.is_repeated:
            if not isinstance(value, list):
                return name, f"must be a JSON array of objects, got {_kind(value)}"
            elements = [(f"{name}[{i}]", element) for i, element in enumerate(value)]
        for where, element in elements:
            if not isinstance(element, dict):
                names = ", ".join(f.json_name for f in field.message_type.fields)
                return where, f"must be a JSON object with the fields {names}, got {_kind(element)}"
            found = shape_error(element, field.message_type, where)
            if found:
                return found
    return None


def _kind(value: Any) -> str:
    """How a JSON value is called in an error: "a string", "a number", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
