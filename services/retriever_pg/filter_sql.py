"""SQL of a search scope: which collections, which metadata conditions.

``scope_sql`` returns a boolean SQL expression over the documents table
(alias ``d``) whose every value, metadata keys included, is a bound
parameter appended to a ``Params`` list; the SQL text itself is built only
from constants, so no user string ever becomes SQL. Semantics as
``services.common.filters.matches``:

- equality: ``d.metadata @> jsonb_build_object($k, $v)`` (served by the GIN
  jsonb_path_ops index on documents.metadata);
- in-list: ``(d.metadata ->> $k) = ANY($values)``;
- numeric range: the value must look like a number (NUMBER_PATTERN), then
  compares as numeric;
- string range: code-point order (COLLATE "C").
"""
from __future__ import annotations

from collections.abc import Sequence

from services.common.filters import NUMBER_PATTERN, Condition


class Params:
    """Positional parameters of one statement: ``add`` returns "$n"."""

    def __init__(self, *initial: object) -> None:
        self.values: list[object] = list(initial)

    def add(self, value: object) -> str:
        """Appends ``value``; returns its placeholder."""
        self.values.append(value)
        return f"${len(self.values)}"


def scope_sql(collections: Sequence[str] | None, conditions: Sequence[Condition], params: Params, doc: str = "d") -> str:
    """A boolean SQL expression: the document ``doc`` belongs to one of
    ``collections`` (any when None) and meets every condition. "TRUE" when
    nothing restricts. ``doc`` must be a constant alias."""
    if not doc.isidentifier():
        raise ValueError("doc must be an SQL alias")
    parts: list[str] = []
    if collections is not None:
        parts.append(f"{doc}.collection = ANY({params.add(list(collections))}::text[])")
    for c in conditions:
        key = params.add(c.key)
        value = f"({doc}.metadata ->> {key}::text)"
        if c.op == "eq":
            parts.append(f"{doc}.metadata @> jsonb_build_object({key}::text, {params.add(c.values[0])}::text)")
        elif c.op == "in":
            parts.append(f"{value} = ANY({params.add(list(c.values))}::text[])")
        elif c.numeric:
            number = f"(CASE WHEN {value} ~ {params.add(NUMBER_PATTERN)}::text THEN {value}::numeric END)"
            parts.extend(f"{number} {op} {params.add(bound)}::numeric" for op, bound in c.bounds())
        else:
            parts.extend(f'({value} COLLATE "C") {op} ({params.add(bound)}::text COLLATE "C")' for op, bound in c.bounds())
    return " AND ".join(parts) or "TRUE"
