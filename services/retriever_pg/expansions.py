"""Query expansion terms from the stored library and corpus (MarxSphere
expandQuery, the MarxSphere design (docs/references.md) section 5):

- L1 ``entity_name``: names of entity cards whose name contains a query
  keyword (external_entities.name ILIKE %w%);
- L2 ``entity_description``: names of entity cards whose definition contains
  a query keyword (external_entities.desc ILIKE %w%);
- L3 ``heading``: headings of chunks containing both of the first two
  keywords, asked only while fewer than ``min_before_headings`` terms were
  found (source_chunks.heading, content ILIKE kw1 AND kw2), ordinals such as
  第七章 removed and article numbers skipped.

At most ``per_level`` (reference 5) terms a level and ``limit`` (reference
15) in all, deduplicated, each with the keyword that found it. Keywords are
bound parameters (LIKE wildcards escaped), never SQL text.
"""
from __future__ import annotations

from typing import AsyncContextManager, Callable

import asyncpg

from services.common.records import ExpansionTerm
from services.common.lexicon import strip_heading_ordinal

#: Reference 000: contentWords[前6].
MAX_KEYWORDS = 6


def _like_pattern(keyword: str) -> str:
    escaped = keyword.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def heading_term(heading: str) -> str:
    """A heading as an expansion term: its ordinal (第七章) removed; "" when
    nothing else is left (an article number such as 第五十六条)."""
    return strip_heading_ordinal(heading)


async def suggest_expansions(
    connect: Callable[[], AsyncContextManager[asyncpg.Connection]],
    keywords: list[str],
    *,
    limit: int = 15,
    per_level: int = 5,
    min_before_headings: int = 5,
    collections: list[str] | None = None,
) -> list[ExpansionTerm]:
    """Expansion terms for ``keywords`` (module doc), L1 then L2 then L3.

    Args:
        connect: pooled-connection factory (``PgStore.connection``).
        keywords: the query's content keywords, best first; the first
            MAX_KEYWORDS of at least 2 characters are used.
        limit / per_level / min_before_headings: caps (module doc).
        collections: where the terms come from (entity cards and documents
            of these collections); ["default"] when None.

    Returns:
        At most ``limit`` expansions, none equal to a keyword or to each other.

    Raises:
        RuntimeError: store not open. asyncpg.PostgresError: query failed.
    """
    words = [k for k in dict.fromkeys(keywords) if len(k) >= 2 and "\x00" not in k][:MAX_KEYWORDS]
    if not words or limit <= 0:
        return []
    seen = set(words)
    out: list[ExpansionTerm] = []

    def add(text: str, origin: str, matched: str, level_count: list[int]) -> None:
        if text and text not in seen and len(out) < limit and level_count[0] < per_level:
            seen.add(text)
            out.append(ExpansionTerm(text, origin, matched))
            level_count[0] += 1

    patterns = [_like_pattern(w) for w in words]
    scope = list(collections or ["default"])
    async with connect() as conn:
        for origin, column in (("entity_name", "name"), ("entity_description", "definition")):
            rows = await conn.fetch(
                f"""
                SELECT DISTINCT ON (c.name) c.name, w.word, w.pos
                FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w(word, pattern, pos)
                JOIN entity_cards c ON c.{column} LIKE w.pattern AND c.collection = ANY($3::text[])
                ORDER BY c.name, w.pos
                """,
                words, patterns, scope,
            )
            count = [0]
            # earlier keywords first, then shorter (more general) names
            for r in sorted(rows, key=lambda r: (r["pos"], len(r["name"]), r["name"])):
                add(r["name"], origin, r["word"], count)
        if len(out) < min_before_headings and len(words) >= 2:
            rows = await conn.fetch(
                """
                SELECT c.heading_path FROM chunks c JOIN documents d ON d.id = c.document_id
                WHERE c.id IN (SELECT a.chunk_id FROM chunk_terms a JOIN chunk_terms b
                               ON b.chunk_id = a.chunk_id AND b.term = $2 WHERE a.term = $1)
                  AND d.collection = ANY($3::text[])
                ORDER BY c.id LIMIT 50
                """,
                words[0], words[1], scope,
            )
            count = [0]
            for r in rows:
                for heading in reversed(list(r["heading_path"])[1:]):  # deepest first, not the title
                    add(heading_term(heading), "heading", f"{words[0]}+{words[1]}", count)
    return out
