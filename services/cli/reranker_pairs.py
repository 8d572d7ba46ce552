"""Training pairs for the cross-encoder, built from the user's own corpus
(pure logic: no model, no I/O beyond reading query files).

Self-supervised queries, each with the passage it came from as the positive:
- inverse cloze (ICT, Lee et al. 2019, ORQA): one sentence of a passage is
  the query, the passage without that sentence (heading line kept) is the
  positive;
- heading: a passage's heading line without its article number ("第十条")
  is the query, the passage the positive;
- alias: an entity alias is the query, the entity card the positive;
- definition: the first sentence of an entity's definition is the query, the
  card without that sentence the positive;
- doc2query: an LLM-written question about a passage (training.py).
Negatives come from first-stage retrieval (training.py). Never from an
evaluation set: ``EvalQueryFilter`` drops every query that equals, contains
or is contained in an evaluation query after normalisation.
"""
from __future__ import annotations

import json
import random
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from services.common.lexicon import strip_heading_ordinal

_SENTENCE = re.compile(r"[^。！？!?；;\n]+[。！？!?；;]?")
_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Passage:
    """A retrievable unit as the reranker sees it.

    Attributes:
        id: chunk id or entity name.
        group: what a negative must not share with the positive (document id,
            entity name).
        heading: the heading line ("" for entity cards).
        body: the text under it.
    """

    id: str
    group: str
    heading: str
    body: str

    @property
    def text(self) -> str:
        """"heading\\nbody" as the gateway sends it ("body" without heading)."""
        return f"{self.heading}\n{self.body}" if self.heading else self.body


@dataclass(frozen=True, slots=True)
class Query:
    """A self-supervised query with its positive.

    Attributes:
        text: the query.
        positive: the positive passage text.
        source: the Passage it came from (its group is excluded from negatives).
        kind: "ict", "heading", "alias", "definition" or "doc2query".
    """

    text: str
    positive: str
    source: Passage
    kind: str


@dataclass(frozen=True, slots=True)
class Pair:
    """One training example: (query, passage, label 1.0 or 0.0, kind)."""

    query: str
    passage: str
    label: float
    kind: str


def normalise_query(text: str) -> str:
    """NFKC, lower-cased, without whitespace or punctuation: the form in
    which training and evaluation queries are compared."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", text).lower())


def sentences(text: str, min_chars: int = 8, max_chars: int = 160) -> list[str]:
    """Sentences of ``text`` (split after 。！？!?；; and newlines), stripped,
    keeping those of ``min_chars`` to ``max_chars`` characters."""
    out = []
    for m in _SENTENCE.finditer(text):
        s = m.group(0).strip()
        if min_chars <= len(s) <= max_chars:
            out.append(s)
    return out


class EvalQueryFilter:
    """Knows every evaluation query and says whether a training query is too
    close to one: equal, containing it, or contained in it, after
    ``normalise_query``. Containment is found through a character-bigram
    index of the evaluation queries (query in big string for the reverse)."""

    def __init__(self, queries: Iterable[str]) -> None:
        normalised = {n for n in (normalise_query(q) for q in queries) if n}
        self.count = len(normalised)
        self._exact = normalised
        self._joined = "\x00".join(sorted(normalised))
        self._by_bigram: dict[str, list[str]] = {}
        self._singles: set[str] = set()
        for q in normalised:
            if len(q) == 1:
                self._singles.add(q)
            else:
                self._by_bigram.setdefault(q[:2], []).append(q)

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> "EvalQueryFilter":
        """Reads the ``query`` field of every JSONL line of ``paths``.

        Raises:
            OSError: a file cannot be read.
            ValueError: a line is not JSON.
        """
        queries = []
        for path in paths:
            with Path(path).open(encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        record = json.loads(line)
                        if isinstance(record, dict) and isinstance(record.get("query"), str):
                            queries.append(record["query"])
        return cls(queries)

    def excluded(self, query: str) -> bool:
        """True when ``query`` is empty after normalisation, equals an
        evaluation query, contains one, or is contained in one."""
        n = normalise_query(query)
        if not n or n in self._exact:
            return True
        if n in self._joined:  # contained in an evaluation query
            return True
        if any(ch in self._singles for ch in n):
            return True
        for i in range(len(n) - 1):
            for q in self._by_bigram.get(n[i:i + 2], ()):
                if n.startswith(q, i):
                    return True
        return False


def heading_query(heading: str) -> str:
    """The heading line without its ordinal parts ("第十条", "第二章"); ""
    when nothing else is left."""
    parts = [p for p in heading.split() if strip_heading_ordinal(p)]
    return " ".join(parts)


def inverse_cloze(passage: Passage, rng: random.Random) -> Query | None:
    """One ICT query of ``passage``: a random sentence as the query, the
    passage without it as the positive. None when the passage has fewer than
    two sentences."""
    candidates = sentences(passage.body)
    if len(candidates) < 2 and not (candidates and len(passage.body) > 2 * len(candidates[0])):
        return None
    chosen = rng.choice(candidates)
    rest = passage.body.replace(chosen, "", 1).strip()
    if len(rest) < 8:
        return None
    positive = f"{passage.heading}\n{rest}" if passage.heading else rest
    return Query(chosen, positive, passage, "ict")


def heading_to_passage(passage: Passage) -> Query | None:
    """The heading (article numbers dropped) as the query, the passage as the positive."""
    q = heading_query(passage.heading)
    return Query(q, passage.text, passage, "heading") if len(q) >= 4 else None


def entity_card(name: str, category: str, aliases: list[str], definition: str) -> str:
    """An entity card as the gateway sends it to the reranker:
    name；category；alias、alias；definition (empty parts left out)."""
    return "；".join(p for p in (name, category, "、".join(aliases), definition) if p)


def entity_queries(name: str, category: str, aliases: list[str], definition: str, rng: random.Random,
                   max_aliases: int = 2) -> list[Query]:
    """Alias-to-card queries (up to ``max_aliases`` aliases, chosen at random)
    and one definition-to-card query (the definition's first sentence; the
    card without it is the positive)."""
    card = entity_card(name, category, aliases, definition)
    source = Passage(name, name, "", card)
    out = [Query(a, card, source, "alias") for a in rng.sample(aliases, min(max_aliases, len(aliases))) if a != name]
    first = sentences(definition, min_chars=6, max_chars=80)
    if first:
        rest = definition.replace(first[0], "", 1).strip()
        out.append(Query(first[0], entity_card(name, category, aliases, rest), source, "definition"))
    return out


def filter_queries(queries: Iterable[Query], evaluation: EvalQueryFilter) -> tuple[list[Query], int]:
    """Drops queries too close to an evaluation query; returns (kept, dropped)."""
    kept, dropped = [], 0
    for q in queries:
        if evaluation.excluded(q.text):
            dropped += 1
        else:
            kept.append(q)
    return kept, dropped


def with_negatives(query: Query, candidates: Iterable[Passage], per_query: int, skip_top: int = 0) -> list[Pair]:
    """The positive pair plus up to ``per_query`` negative pairs for ``query``
    from ``candidates`` (first-stage results, best first). A candidate is not
    a negative when it shares the positive's group, or when its text contains
    the query (duplicated articles, historical versions). The first
    ``skip_top`` eligible candidates are skipped (likely unlabelled positives)."""
    pairs = [Pair(query.text, query.positive, 1.0, query.kind)]
    needle = normalise_query(query.text)
    seen: set[str] = set()
    skipped = 0
    for cand in candidates:
        if len(pairs) > per_query:
            break
        if cand.group == query.source.group or cand.id in seen:
            continue
        seen.add(cand.id)
        if needle and needle in normalise_query(cand.text):
            continue
        if skipped < skip_top:
            skipped += 1
            continue
        pairs.append(Pair(query.text, cand.text, 0.0, query.kind))
    return pairs


def guard(pairs: list[Pair], evaluation: EvalQueryFilter) -> list[Pair]:
    """The final check before training: no pair whose query is excluded
    (raises AssertionError naming the query if one slipped through)."""
    for p in pairs:
        if evaluation.excluded(p.query):
            raise AssertionError(f"training pair from an evaluation query: {p.query!r}")
    return pairs
