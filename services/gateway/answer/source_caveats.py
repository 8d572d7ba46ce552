"""Cited sources the reader should not take at face value: each gets its
domain pack's caveat (law_zh: the status of a repealed or historical
version) on its citation, and the answer ends with a note naming them, so an
article of a repealed law is never passed off as the law in force.

Pure: the pack's caveat is looked up through ``domains.source_caveat`` from
the source's own metadata, for the packs of the collections searched.
"""
from __future__ import annotations

from collections.abc import Mapping

import domains
from services.common.text import in_script_of
from services.gateway.answer.extractive import EXTRACTIVE_LABEL_EN, extractive_label


def caveat_of(candidate, packs: list[str] | tuple[str, ...]) -> str:
    """The caveat of one source (a Candidate: ``metadata``), "" when none or
    when no pack is named (the generic path gives none)."""
    if not packs:
        return ""
    return domains.source_caveat(dict(candidate.metadata), packs)


def caveat_note(question: str, caveats: Mapping[int, str]) -> str:
    """The note an answer ends with for its cited sources {number: caveat}
    that have one, in the question's language (as its extractive label);
    "" when none has.

    >>> caveat_note("大气污染如何处罚？", {2: "已废止"})
    '注意：[2] 在资料中标注为“已废止”，所引内容可能已不再适用。'
    """
    marked = [(n, c) for n, c in sorted(caveats.items()) if c]
    if not marked:
        return ""
    if extractive_label(question) == EXTRACTIVE_LABEL_EN:
        parts = ", ".join(f'[{n}] is marked "{c}"' for n, c in marked)
        return f"Note: {parts} in the sources; what it says may no longer apply."
    parts = "，".join(f"[{n}] 在资料中标注为“{c}”" for n, c in marked)
    return in_script_of(question, f"注意：{parts}，所引内容可能已不再适用。")
