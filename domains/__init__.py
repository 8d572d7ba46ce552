"""Domain packs (domains.pack.DomainPack) and their registry.

``get_pack(name)`` returns a registered pack; ``""`` means the default,
``generic``. A collection names its pack when it is created (IngestRequest
.domain_pack) and keeps it. Packs import no service.
"""
from __future__ import annotations

from domains.generic import PACK as GENERIC
from domains.law_zh import PACK as LAW_ZH
from domains.pack import DomainPack

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


__all__ = ["DEFAULT_PACK", "DomainPack", "GENERIC", "LAW_ZH", "PACKS", "UnknownPack", "classify", "get_pack"]
