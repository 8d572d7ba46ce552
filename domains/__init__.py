"""Domain packs (domains.pack.DomainPack) and their registry.

``get_pack(name)`` returns a registered pack; ``""`` means the default,
``generic``. A collection names its pack when it is created (IngestRequest
.domain_pack) and keeps it. Packs import no service.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domains.generic import PACK as GENERIC
from domains.law_zh import PACK as LAW_ZH
from domains.pack import AnswerExample, AnswerPrompt, CitationRules, DomainPack, QueryAdapter, RewritePrompts

DEFAULT_PACK = GENERIC.name
#: Every registered pack by name.
PACKS: dict[str, DomainPack] = {p.name: p for p in (GENERIC, LAW_ZH)}


class UnknownPack(ValueError):
    """A pack name that is not registered."""


def get_pack(name: str) -> DomainPack:
    """The pack called ``name`` ("" = the default pack).

    Raises:
        UnknownPack: no pack has that name (the message lists the known ones).
    """
    pack = PACKS.get(name or DEFAULT_PACK)
    if pack is None:
        raise UnknownPack(f"unknown domain pack {name!r}; known: {', '.join(sorted(PACKS))}")
    return pack


def classify(query: str, packs: list[str] | tuple[str, ...]) -> tuple[str, float] | None:
    """The first question type one of ``packs`` recognises in ``query``
    (packs in the order given, unknown names skipped), else None."""
    for name in packs:
        pack = PACKS.get(name)
        if pack is not None:
            found = pack.classify(query)
            if found is not None:
                return found
    return None


def first_part(packs: list[str] | tuple[str, ...], part: str) -> Any:
    """The pack part named ``part`` (a DomainPack attribute) of the first of
    ``packs`` that has one (not None; unknown names skipped), else None."""
    for name in packs:
        pack = PACKS.get(name)
        if pack is not None and getattr(pack, part) is not None:
            return getattr(pack, part)
    return None


def query_adapter(packs: list[str] | tuple[str, ...], question_type: str, model: str) -> QueryAdapter | None:
    """The query adapter of the first of ``packs`` whose adapter maps a
    question of ``question_type`` embedded by ``model``, else None."""
    for name in packs:
        pack = PACKS.get(name)
        if pack is not None and pack.query_adapter is not None and pack.query_adapter.applies(question_type, model):
            return pack.query_adapter
    return None


def citation_rules(packs: list[str] | tuple[str, ...]) -> CitationRules | None:
    """The citation rules of the first of ``packs`` that has any, else None:
    the general rule, where a source's name is content like any other word."""
    return first_part(packs, "citations")


def answer_prompt(packs: list[str] | tuple[str, ...]) -> AnswerPrompt | None:
    """The answer prompt of the first of ``packs`` that has one, else None
    (the gateway's general prompt)."""
    return first_part(packs, "answer_prompt")


def rewrite_prompts(packs: list[str] | tuple[str, ...]) -> RewritePrompts | None:
    """The rewrite prompts of the first of ``packs`` that has them, else
    None (the expander's general ones)."""
    return first_part(packs, "rewrite_prompts")


def source_caveat(metadata: Mapping[str, str], packs: list[str] | tuple[str, ...]) -> str:
    """The caveat the first of ``packs`` with one gives a source of this
    ``metadata`` (``DomainPack.source_caveat``), else ""."""
    for name in packs:
        pack = PACKS.get(name)
        caveat = pack.source_caveat(metadata) if pack is not None else ""
        if caveat:
            return caveat
    return ""


def rewrite_query(query: str, packs: list[str] | tuple[str, ...]) -> str:
    """``query`` rewritten by each of ``packs`` in turn (``DomainPack.rewrite_query``; unknown names skipped)."""
    for name in packs:
        pack = PACKS.get(name)
        if pack is not None:
            query = pack.rewrite_query(query)
    return query


def title_aliases(title: str, packs: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """Other names ``title`` is asked by under ``packs`` (every registered
    pack when None), in pack order, without repeats or the title itself."""
    out: dict[str, None] = {}
    for name in (PACKS if packs is None else packs):
        pack = PACKS.get(name)
        if pack is not None:
            for alias in pack.title_aliases(title):
                if alias and alias != title:
                    out.setdefault(alias, None)
    return list(out)


__all__ = ["AnswerExample", "AnswerPrompt", "CitationRules", "DEFAULT_PACK", "DomainPack", "QueryAdapter", "query_adapter", "answer_prompt", "citation_rules", "rewrite_prompts", "rewrite_query", "source_caveat", "title_aliases", "GENERIC", "LAW_ZH", "PACKS", "UnknownPack", "classify", "get_pack"]
