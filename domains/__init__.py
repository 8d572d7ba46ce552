"""Domain packs (domains.pack.DomainPack) and their registry.

``get_pack(name)`` returns a registered pack; ``""`` means the default,
``generic``. A collection names its pack when it is created (IngestRequest
.domain_pack) and keeps it. Packs import no service.
"""
from __future__ import annotations

from domains.generic import PACK as GENERIC
from domains.law_zh import PACK as LAW_ZH
from domains.pack import CitationRules, DomainPack

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


def citation_rules(packs: list[str] | tuple[str, ...]) -> CitationRules | None:
    """The citation rules of the first of ``packs`` that has any (unknown
    names skipped), else None: the general rule, where a source's name is
    content like any other word."""
    for name in packs:
        pack = PACKS.get(name)
        if pack is not None and pack.citations is not None:
            return pack.citations
    return None


def answer_prompt(packs: list[str] | tuple[str, ...]):
    """The answer prompt (domains.pack.AnswerPrompt) of the first of
    ``packs`` that has one, else None (the gateway's general prompt)."""
    for name in packs:
        pack = PACKS.get(name)
        if pack is not None and pack.answer_prompt is not None:
            return pack.answer_prompt
    return None


def rewrite_prompts(packs: list[str] | tuple[str, ...]):
    """The rewrite prompts (domains.pack.RewritePrompts) of the first of
    ``packs`` that has them, else None (the expander's general ones)."""
    for name in packs:
        pack = PACKS.get(name)
        if pack is not None and pack.rewrite_prompts is not None:
            return pack.rewrite_prompts
    return None


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


__all__ = ["CitationRules", "DEFAULT_PACK", "DomainPack", "answer_prompt", "citation_rules", "rewrite_prompts", "title_aliases", "GENERIC", "LAW_ZH", "PACKS", "UnknownPack", "classify", "get_pack"]
