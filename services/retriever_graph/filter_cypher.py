"""Cypher of a search scope: which collections, which metadata conditions.

Document metadata is kept twice on a ``Document`` node: as the JSON string
``metadata`` (returned to callers) and as one property per key, named
``meta.<key>`` (filtered on). ``scope_cypher`` returns a boolean Cypher
expression over a Document variable whose every value, the property names
included, is a query parameter (``d[$s_k0]``, dynamic property access), so
no user string becomes Cypher text. Semantics as
``services.common.filters.matches``: numeric ranges compare
``toFloatOrNull`` of the value (values that are not numbers never match),
string ranges compare strings.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.common.filters import Condition

#: Prefix of the per-key metadata properties of a Document node.
META_PREFIX = "meta."


def meta_properties(metadata: Mapping[str, str], old: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``meta.<key>`` properties of ``metadata``, with None (removal
    under ``SET d += ...``) for keys of ``old`` that are gone."""
    props: dict[str, Any] = {META_PREFIX + k: None for k in (old or {}) if k not in metadata}
    props.update({META_PREFIX + k: str(v) for k, v in metadata.items()})
    return props


def scope_cypher(collections: Sequence[str] | None, conditions: Sequence[Condition], params: dict[str, Any],
                 var: str = "d", prefix: str = "s") -> str:
    """A boolean Cypher expression: Document ``var`` belongs to one of
    ``collections`` (any when None) and meets every condition; parameters
    are added to ``params`` under names starting with ``prefix``. "true"
    when nothing restricts. ``var`` and ``prefix`` must be constant
    identifiers."""
    if not (var.isidentifier() and prefix.isidentifier()):
        raise ValueError("var and prefix must be identifiers")
    parts: list[str] = []
    if collections is not None:
        params[f"{prefix}_collections"] = list(collections)
        parts.append(f"{var}.collection IN ${prefix}_collections")
    for i, c in enumerate(conditions):
        key = f"{prefix}_k{i}"
        params[key] = META_PREFIX + c.key
        value = f"{var}[${key}]"
        if c.op in ("eq", "in"):
            params[f"{prefix}_v{i}"] = c.values[0] if c.op == "eq" else list(c.values)
            parts.append(f"{value} {'=' if c.op == 'eq' else 'IN'} ${prefix}_v{i}")
            continue
        for j, (op, bound) in enumerate(c.bounds()):
            name = f"{prefix}_b{i}_{j}"
            params[name] = float(bound) if c.numeric else bound
            parts.append(f"{'toFloatOrNull(' + value + ')' if c.numeric else value} {op} ${name}")
    return " AND ".join(parts) or "true"
