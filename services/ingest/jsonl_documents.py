"""Reads documents from JSONL bytes, one record a line.

A record is {"id", "text"} plus optional "title", "heading_path" (list), the
law-corpus fields "law", "chapter", "section", "article", "status", and
"metadata" (an object; a value that is not a string is stored as its JSON
text: true -> "true", 2025 -> "2025", {"a": 1} -> '{"a":1}', and a null
leaves its key out). Any other field fails the record, named (a field of
the user's own goes under "metadata"). Without "heading_path" the headings are
[law or title, chapter, section, article] with empty parts dropped. The
fields "status", "law" and "source" are also kept as metadata, so searches
can filter on them (status = "现行有效", law = "中华人民共和国专利法").
An id over MAX_ID_CHARS (512) characters, or a title or heading path over
MAX_HEADING_CHARS (1,000; services.ingest.document_ids), fails its record,
named, before anything is stored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from services.common.filters import metadata_key_problem
from services.common.records import storable_text
from services.common.spelling import closest
from services.ingest.document_ids import MAX_HEADING_CHARS, heading_length_problem, id_length_problem, path_id_problem

#: Deepest nesting a record may have (a record's own object is level 1).
#: Deeper JSON is no document or entity, and unbounded nesting would exhaust
#: the parser's recursion (a RecursionError, once answered INTERNAL).
MAX_JSON_DEPTH = 32

_LAW_FIELDS = ("chapter", "section", "article")
_METADATA_FIELDS = ("status", "law", "source")
#: Every field a record may have; any other is a failure naming it (a misspelt "metdata" would otherwise
#: drop the record's metadata without a word, and filters would miss the document).
RECORD_FIELDS = ("id", "text", "title", "heading_path", "metadata", *_LAW_FIELDS, *_METADATA_FIELDS)


@dataclass(slots=True)
class ParsedDocument:
    """One readable record."""

    index: int
    id: str
    title: str
    heading_path: list[str]
    text: str
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ParseFailure:
    """One unreadable record: its 0-based line, id if known, the JSON field
    at fault ("" for the whole line) and why."""

    index: int
    id: str
    field: str
    reason: str


def too_deep_field(record: dict, max_depth: int = MAX_JSON_DEPTH) -> str:
    """The first top-level field of ``record`` whose value nests objects or
    lists deeper than ``max_depth`` levels in all, or "" when none does.
    Iterative, so any depth is measured without recursion."""
    for key, value in record.items():
        stack = [(value, 2)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, (dict, list)):
                if depth > max_depth:
                    return str(key)
                stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return ""


def load_record(line: str | bytes) -> tuple[object, str, str]:
    """(record, field, reason) of one JSONL line: the decoded value with
    field and reason "", or None with the field at fault ("" for the whole
    line) and why: invalid JSON, or nesting deeper than MAX_JSON_DEPTH."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        return None, "", f"invalid JSON: {err.msg}"
    except RecursionError:
        return None, "", f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(record, dict):
        deep = too_deep_field(record)
        if deep:
            return None, deep, f"nested deeper than {MAX_JSON_DEPTH} levels"
    elif isinstance(record, list) and too_deep_field({"": record}):
        return None, "", f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    return record, "", ""


def unstorable_field(record: dict) -> str:
    """The first top-level field of ``record`` holding text that no store
    can keep (a NUL character or a lone surrogate such as \\ud800, at any
    depth), or "" when every value is storable."""

    def bad(value) -> bool:
        if isinstance(value, str):
            return not storable_text(value)
        if isinstance(value, dict):
            return any(bad(k) or bad(v) for k, v in value.items())
        if isinstance(value, list):
            return any(bad(v) for v in value)
        return False

    return next((str(k) for k, v in record.items() if bad(k) or bad(v)), "")


def parse_jsonl(payload: bytes) -> tuple[list[ParsedDocument], list[ParseFailure]]:
    """Parses every non-blank line of ``payload``; bad lines become failures
    and do not stop the others."""
    docs: list[ParsedDocument] = []
    failures: list[ParseFailure] = []
    for index, raw in enumerate(payload.split(b"\n")):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            failures.append(ParseFailure(index, "", "", f"line is not UTF-8 (byte {err.start})"))
            continue
        record, bad_field, reason = load_record(line)
        if reason:
            failures.append(ParseFailure(index, "", bad_field, reason))
            continue
        parsed = parse_record(index, record)
        (docs if isinstance(parsed, ParsedDocument) else failures).append(parsed)
    return docs, failures


def metadata_text(value: object) -> str:
    """A metadata value as stored and filtered on: a string as it is, any
    other JSON value as its JSON text ("true", "2025", '{"a":1}'), never
    Python's spelling of it ("True", "{'a': 1}"), so ``flag = "true"``
    finds what ``{"flag": true}`` stored."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def unknown_field_reason(name: str) -> str:
    """Why a record field ``name`` that is not one of RECORD_FIELDS fails: the
    known field it is closest to when it looks like a misspelling of one,
    and where a field of the user's own belongs (under "metadata")."""
    close = closest(name, RECORD_FIELDS, max_edits=2)
    hint = f'; did you mean "{close}"?' if close else "."
    return (f'is not a field of a record{hint} A field of your own goes under "metadata" '
            f"(a record's fields: {', '.join(RECORD_FIELDS)})")


def parse_record(index: int, record: object) -> ParsedDocument | ParseFailure:
    """Validates one decoded record."""
    if not isinstance(record, dict):
        return ParseFailure(index, "", "", "record must be a JSON object")
    raw_id = record.get("id")
    if raw_id is None or isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or not str(raw_id).strip():
        return ParseFailure(index, "", "id", "must be a non-empty string or integer")
    doc_id = str(raw_id).strip()
    too_long = id_length_problem(doc_id)
    if too_long:
        return ParseFailure(index, doc_id[:40] + "…", "id", too_long)
    problem = path_id_problem(doc_id)
    if problem:
        return ParseFailure(index, doc_id, "id", f"{doc_id!r} {problem}: its REST name could not reach it")
    unknown = next((str(k) for k in record if k not in RECORD_FIELDS), None)
    if unknown is not None:
        return ParseFailure(index, doc_id, unknown, unknown_field_reason(unknown))
    bad_field = unstorable_field(record)
    if bad_field:
        return ParseFailure(index, doc_id if bad_field != "id" else "", bad_field, "must not contain NUL characters or lone surrogates")
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        return ParseFailure(index, doc_id, "text", "must be a non-empty string")
    if "\x00" in text:
        return ParseFailure(index, doc_id, "text", "must not contain NUL characters")
    title = str(record.get("title") or record.get("law") or "").strip()
    headings = record.get("heading_path")
    if headings is not None:
        if not isinstance(headings, list) or not all(isinstance(h, str) for h in headings):
            return ParseFailure(index, doc_id, "heading_path", "must be a list of strings")
        heading_path = [h.strip() for h in headings if h.strip()]
    else:
        heading_path = [p for p in [title, *(str(record.get(f) or "").strip() for f in _LAW_FIELDS)] if p]
    title_field = "title" if record.get("title") else "law"
    too_long = heading_length_problem([title])
    if too_long:
        return ParseFailure(index, doc_id, title_field, too_long)
    too_long = heading_length_problem(heading_path)
    if too_long and headings is not None:
        return ParseFailure(index, doc_id, "heading_path", too_long)
    if too_long:  # a path built from the law fields: named by the longest of them, the others said
        parts = [f for f in (title_field, *_LAW_FIELDS) if str(record.get(f) or "").strip()]
        longest = max(parts, key=lambda f: len(str(record.get(f) or "").strip()))
        others = [f for f in parts if f != longest]
        said = f"with {', '.join(others[:-1]) + ' and ' if len(others) > 1 else ''}{others[-1]} " if others else ""
        return ParseFailure(index, doc_id, longest, f"{said}makes a heading path of {sum(len(h) for h in heading_path):,} "
                                                    f"characters; at most {MAX_HEADING_CHARS:,} in all")
    metadata_raw = record.get("metadata") or {}
    if not isinstance(metadata_raw, dict):
        return ParseFailure(index, doc_id, "metadata", "must be an object")
    unnamed = next((problem for k in metadata_raw if (problem := metadata_key_problem(str(k)))), None)
    if unnamed:  # stored, a filter could never name it
        return ParseFailure(index, doc_id, "metadata", unnamed)
    metadata = {str(k): metadata_text(v) for k, v in metadata_raw.items() if v is not None}
    for key in _METADATA_FIELDS:
        if record.get(key):
            metadata.setdefault(key, str(record[key]))
    return ParsedDocument(index, doc_id, title or (heading_path[0] if heading_path else doc_id), heading_path, text, metadata)
