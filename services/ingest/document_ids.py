"""Which document ids GraphMesh refuses, whatever brings them in (a file's
name, a JSONL record's "id"): an id is part of the document's REST name,
collections/{collection}/documents/{id}, so it must reach that document; and
how long an id, a title and a heading path may be, so that every store can
index what it keeps."""
from __future__ import annotations

import re
import unicodedata

#: Path separators of a document id: "/", and "\\", which browsers and WHATWG URL parsers read as "/" in
#: an http(s) URL's path (a trial stored "..\\..\\win.txt" while "../../x.txt" was refused).
_SEPARATORS = re.compile(r"[/\\]")
#: Longest document id, in characters. PostgreSQL's btree keys hold about 2,700 bytes; 512 characters of
#: at most 4 bytes each fit, with the chunk ordinal the chunks' ids add.
MAX_ID_CHARS = 512
#: Longest title, and longest heading path (its parts together), in characters. Neo4j keeps a heading's
#: path, joined, as its indexed id, and its range index refuses a key of about 8 KB: a trial's
#: 100,000-character title was stored by PostgreSQL, refused by Neo4j, and reported failed while Search
#: found it. 1,000 characters of at most 4 bytes each stay well inside.
MAX_HEADING_CHARS = 1000


def id_length_problem(doc_id: str) -> str:
    """Why ``doc_id`` is too long to store, or "" (at most MAX_ID_CHARS)."""
    return f"must be at most {MAX_ID_CHARS} characters (it has {len(doc_id):,})" if len(doc_id) > MAX_ID_CHARS else ""


def heading_length_problem(parts: list[str]) -> str:
    """Why a title or heading path ``parts`` is too long to store, or "":
    its parts together must be at most MAX_HEADING_CHARS characters."""
    total = sum(len(p) for p in parts)
    return (f"must be at most {MAX_HEADING_CHARS:,} characters"
            + (" in all" if len(parts) > 1 else "") + f" (it has {total:,})") if total > MAX_HEADING_CHARS else ""


def path_id_problem(doc_id: str) -> str:
    """Why ``doc_id``, a document id (a file's name or relative path, a
    JSONL record's "id"), is refused, or "": a "." or ".." segment or an empty one (a leading "/",
    "//"; segments split at "/" or "\\"), which an HTTP client folds away before the request leaves it, so
    the document's REST name (collections/{c}/documents/{id}) would reach
    another resource or none; a control or invisible formatting character
    (a right-to-left override shows "\u202egnp.txt" as "txt.png" in a
    listing)."""
    if any(unicodedata.category(ch) in ("Cc", "Cf") for ch in doc_id):
        return "holds a control or invisible formatting character"
    if any(segment in ("", ".", "..") for segment in _SEPARATORS.split(doc_id)):
        return 'has an empty, "." or ".." path segment'
    return ""
