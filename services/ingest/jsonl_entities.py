"""Reads library entities and knowledge-graph triples from JSONL bytes.

Entity record: {"name"} plus optional "category", "definition",
"aliases" (list, or one string split on 、,，;；|), "parents" (same),
"attributes" (object); any other top-level string field becomes an
attribute (e.g. "english"). Triple record: {"subject", "predicate", "object"}.
A line that is not UTF-8 JSON, lacks a required field, holds a NUL or a
lone surrogate, has a name, category, alias or parent longer than
MAX_NAME_CHARS, or repeats an earlier entity's name is a failure, so every
store receives the same entities. ``entity_line`` and ``triple_line`` write
the records these read (an export ingests again).
"""
from __future__ import annotations

import json
import re

from graphmesh.common.v1 import entity_pb2
from services.ingest.jsonl_documents import ParseFailure, load_record, unstorable_field

#: Longest name, category, alias or parent (characters); longer values are
#: not names, and Neo4j cannot index them (its index key limit is ~8 KB).
MAX_NAME_CHARS = 256

_SPLIT = re.compile(r"[、,，;；|]+")
_ENTITY_FIELDS = {"name", "category", "definition", "aliases", "parents", "attributes"}


def _names(value, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        names = [v.strip() for v in _SPLIT.split(value) if v.strip()]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = [v.strip() for v in value if v.strip()]
    else:
        raise ValueError(f"{field} must be a list of strings or a string")
    if any(len(n) > MAX_NAME_CHARS for n in names):
        raise ValueError(f"{field} must each be at most {MAX_NAME_CHARS} characters")
    return names


def _records(payload: bytes):
    """(line index, record, None) for each JSON object line whose text every
    store can hold; (line index, None, failure) for any other non-blank line."""
    for index, raw in enumerate(payload.split(b"\n")):  # JSON Lines: "\n" ends a line ("\r\n" too)
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield index, None, ParseFailure(index, "", "", "line is not UTF-8")
            continue
        rec, bad_field, reason = load_record(text)
        if reason:
            yield index, None, ParseFailure(index, "", bad_field, reason)
            continue
        if not isinstance(rec, dict):
            yield index, None, ParseFailure(index, "", "", "record must be a JSON object")
            continue
        bad_field = unstorable_field(rec)
        if bad_field:
            yield index, None, ParseFailure(index, "", bad_field, "must not contain NUL characters or lone surrogates")
            continue
        yield index, rec, None


def parse_entities(payload: bytes) -> tuple[list[entity_pb2.Entity], list[ParseFailure], list[int]]:
    """Entities, failures (0-based line index, field at fault) and the line
    index of each entity."""
    out, failures, lines = [], [], []
    first_line: dict[str, int] = {}
    for index, rec, failure in _records(payload):
        if failure:
            failures.append(failure)
            continue
        name = rec.get("name")
        if not isinstance(name, str) or not name.strip():
            failures.append(ParseFailure(index, "", "name", "must be a non-empty string"))
            continue
        name = name.strip()
        category = str(rec.get("category") or "").strip()
        too_long = next((f for f, v in (("name", name), ("category", category)) if len(v) > MAX_NAME_CHARS), "")
        if too_long:
            failures.append(ParseFailure(index, name[:40], too_long, f"must be at most {MAX_NAME_CHARS} characters"))
            continue
        if name in first_line:
            failures.append(ParseFailure(index, name, "name", f"repeats the entity on line {first_line[name] + 1}"))
            continue
        try:
            attributes = rec.get("attributes") or {}
            if not isinstance(attributes, dict):
                raise ValueError("attributes must be an object")
            attrs = {str(k): str(v) for k, v in attributes.items()}
            attrs.update({k: v for k, v in rec.items() if k not in _ENTITY_FIELDS and isinstance(v, str) and v})
            out.append(entity_pb2.Entity(
                name=name, category=category, definition=str(rec.get("definition") or ""),
                aliases=_names(rec.get("aliases"), "aliases"), parents=_names(rec.get("parents"), "parents"), attributes=attrs,
            ))
            lines.append(index)
            first_line[name] = index
        except ValueError as err:
            field = str(err).split(" ", 1)[0]
            failures.append(ParseFailure(index, name, field, str(err)))
    return out, failures, lines


def parse_triples(payload: bytes) -> tuple[list[entity_pb2.Triple], list[ParseFailure], list[int]]:
    """Triples, failures and the line index of each triple."""
    out, failures, lines = [], [], []
    for index, rec, failure in _records(payload):
        if failure:
            failures.append(failure)
            continue
        missing = next((f for f in ("subject", "predicate", "object") if not isinstance(rec.get(f), str) or not rec[f].strip()), None)
        if missing:
            failures.append(ParseFailure(index, str(rec.get("subject") or ""), missing, "must be a non-empty string"))
            continue
        out.append(entity_pb2.Triple(subject=rec["subject"].strip(), predicate=rec["predicate"].strip(), object=rec["object"].strip()))
        lines.append(index)
    return out, failures, lines


def entity_line(e: entity_pb2.Entity) -> str:
    """One entity as a JSONL line ``parse_entities`` reads back to the same
    entity: {"name", "category", "definition", "aliases", "parents",
    "attributes"} (UTF-8, no trailing newline)."""
    return json.dumps({"name": e.name, "category": e.category, "definition": e.definition, "aliases": list(e.aliases),
                       "parents": list(e.parents), "attributes": dict(sorted(e.attributes.items()))}, ensure_ascii=False)


def triple_line(t: entity_pb2.Triple) -> str:
    """One fact as a JSONL line ``parse_triples`` reads: {"subject", "predicate", "object"}."""
    return json.dumps({"subject": t.subject, "predicate": t.predicate, "object": t.object}, ensure_ascii=False)
