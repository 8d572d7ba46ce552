"""Which document ids GraphMesh refuses, whatever brings them in (a file's
name, a JSONL record's "id"): an id is part of the document's REST name,
collections/{collection}/documents/{id}, so it must reach that document."""
from __future__ import annotations

import re
import unicodedata

#: Path separators of a document id: "/", and "\\", which browsers and WHATWG URL parsers read as "/" in
#: an http(s) URL's path (a trial stored "..\\..\\win.txt" while "../../x.txt" was refused).
_SEPARATORS = re.compile(r"[/\\]")


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
