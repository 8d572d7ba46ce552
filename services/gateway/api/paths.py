"""HTTP path templates of google.api.http (AIP-127) for the REST
transcoder: ``/v1/{parent=collections/*}/documents`` becomes an aiohttp
route whose variable ``parent`` matches "collections/<one segment>"; ``*``
is one path segment, ``**`` the rest of the path; ``{field}`` alone is one
segment. Path variables and, for a route without body, the query
parameters (by proto or JSON field name) fill the request message."""
from __future__ import annotations

import re
from collections.abc import Mapping

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)(?:=([^}]*))?\}")
_INTEGERS = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
             FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64}


def _segment_regex(pattern: str) -> str:
    parts = []
    for segment in pattern.split("/"):
        if segment == "**":
            parts.append(".+")
        elif segment == "*":
            parts.append("[^/]+")
        else:
            parts.append(re.escape(segment))
    return "/".join(parts)


def aiohttp_path(template: str) -> str:
    """The aiohttp route of a google.api.http path template."""
    return _VARIABLE.sub(lambda m: "{" + m.group(1) + ":" + _segment_regex(m.group(2) or "*") + "}", template)


def template_regex(template: str) -> re.Pattern[str]:
    """A regex matching request paths of ``template`` with one named group per variable."""
    out, at = [], 0
    for m in _VARIABLE.finditer(template):
        out.append(re.escape(template[at:m.start()]))
        out.append(f"(?P<{m.group(1)}>{_segment_regex(m.group(2) or '*')})")
        at = m.end()
    out.append(re.escape(template[at:]))
    return re.compile("^" + "".join(out) + "$")


def fill_message(message: Message, path: Mapping[str, str], query: Mapping[str, str]) -> tuple[str, str] | None:
    """Sets ``message`` fields from path variables and query parameters.

    Returns:
        None, or (field, reason) of the first value that does not fit:
        an unknown parameter (named as given), a repeated or message
        field, a non-integer, an enum value that is none of its names or
        numbers (named by its proto name: ``page_size`` for ``pageSize``,
        as the servicers name fields). Enums are given by value name
        (``view=DOCUMENT_VIEW_FULL``) or number.
    """
    fields = {f.name: f for f in message.DESCRIPTOR.fields} | {f.json_name: f for f in message.DESCRIPTOR.fields}
    for source in (path, query):
        for name, value in source.items():
            field = fields.get(name)
            if field is None:
                return name, "is not a field of this request"
            if field.is_repeated or field.type == FieldDescriptor.TYPE_MESSAGE:
                return field.name, "cannot be given as a URL parameter"
            if field.type in _INTEGERS:
                try:
                    number = int(value)
                except ValueError:
                    return field.name, f"must be an integer, got {value!r}"
                try:
                    setattr(message, field.name, number)
                except ValueError:  # past the field's 32 or 64 bits
                    return field.name, f"{number} is out of range"
            elif field.type == FieldDescriptor.TYPE_BOOL:
                setattr(message, field.name, value.lower() in ("1", "true", "yes"))
            elif field.type == FieldDescriptor.TYPE_STRING:
                setattr(message, field.name, value)
            elif field.type == FieldDescriptor.TYPE_ENUM:
                names = field.enum_type.values_by_name
                numbers = field.enum_type.values_by_number
                number = names[value].number if value in names else int(value) if value.isdigit() else None
                if number not in numbers:
                    return field.name, f"must be one of {', '.join(names)}, got {value!r}"
                setattr(message, field.name, number)
            else:
                return field.name, "cannot be given as a URL parameter"
    return None
