"""The known name a mistyped one looks like, for errors that say "did you
mean ...": a JSONL record's field, an MCP tool's argument, a collection."""
from __future__ import annotations

from collections.abc import Iterable


def closest(name: str, known: Iterable[str], max_edits: int = 2) -> str:
    """The one of ``known`` nearest ``name`` by Levenshtein distance, case
    aside, when at most ``max_edits`` edits away (ties: the first in
    ``known``'s order); "" when none is."""
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    found = process.extractOne(name, list(known), scorer=Levenshtein.distance, score_cutoff=max_edits,
                               processor=str.lower)
    return found[0] if found else ""
