"""The document facts a domain pack's extractor returns
(``DomainPack.document_facts``) and the graph retriever stores in its
document graph, with the pure rules that link them. No I/O; no domain.

A document is a *unit* (law_zh: an article) of a *group* (law_zh: a law):
``law`` and ``article`` below name the group key and the unit key, as the
stored graph does (Document.law_key, Document.article_key). Facts are the
references the document makes to other units (CITES, AMENDS), the terms it
defines, the acts it labels (law_zh: the offences a penal article
punishes), its status and whether it is current. The graph retriever's
lookup tables are built from what was stored (``ArticleEntry``,
``TermEntry``) by the pack's ``lookup_index``, whose lookups return
``IndexHit``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: Bumped whenever a pack's parsing or the graph's keys change: documents
#: linked by an older version report no content hash, so the next ingest
#: sends them again. 2: keys and terms scoped per collection. 3: law_zh
#: counts 已被修改 (the Criminal Law) as in force.
DOCGRAPH_VERSION = 3
KEY_SEPARATOR = "#"
COLLECTION_SEPARATOR = "/"
DEFAULT_COLLECTION = "default"


def key_of(law: str, article: str, collection: str = DEFAULT_COLLECTION) -> str:
    """The key node of (group key, unit key) within ``collection``:
    "default/刑法#234". Keys are per collection, so references resolve only
    to documents of the citing document's own collection."""
    return f"{collection}{COLLECTION_SEPARATOR}{law}{KEY_SEPARATOR}{article}"


def term_key(law: str, name: str, collection: str = DEFAULT_COLLECTION) -> str:
    """The Term node key of a term defined by group ``law`` in ``collection``."""
    return f"{collection}{COLLECTION_SEPARATOR}{law}{KEY_SEPARATOR}{name}"

@dataclass(slots=True)
class RefFact:
    """A reference or amendment of a document, before resolution.

    Attributes:
        law: law key it points into ("" when a bare law name, see ``hint``).
        article: article key.
        rel: "CITES" or "AMENDS".
        kind: Reference.kind for CITES, the amendment action for AMENDS.
        chunk_id: provenance chunk.
        line: line of the chunk it was found in.
        hint: text before a bare law name (resolved against known laws).
    """

    law: str
    article: str
    rel: str
    kind: str
    chunk_id: str
    line: int
    hint: str = ""


@dataclass(slots=True)
class TermFact:
    """A term the document defines (``Definition`` plus provenance)."""

    name: str
    definition: str
    kind: str
    chunk_id: str


@dataclass(slots=True)
class DocFacts:
    """What one document contributes.

    Attributes:
        id: document id.
        law: law key ("" for a document outside any law).
        article: article key, "" when its label is no article number.
        status: metadata status ("" when none).
        current: whether the document is in force.
        refs / terms: references (CITES and AMENDS) and defined terms.
        offences: acts the document labels (law_zh: what a penal article
            punishes, ``references.find_offences``).
        text: the document's text (chunks joined, overlap not removed).
        first_chunk: id of its first chunk ("" without chunks).
        collection: the document's collection (set by the graph retriever,
            not the pack): keys and terms are scoped to it.
    """

    id: str
    law: str
    article: str
    status: str
    current: bool
    refs: list[RefFact] = field(default_factory=list)
    terms: list[TermFact] = field(default_factory=list)
    offences: list[str] = field(default_factory=list)
    text: str = ""
    first_chunk: str = ""
    collection: str = DEFAULT_COLLECTION

    @property
    def key(self) -> str:
        """ArticleKey of the document, "" without an article number."""
        return key_of(self.law, self.article, self.collection) if self.law and self.article else ""


def resolve_hints(refs: Iterable[RefFact], known_laws: Iterable[str]) -> tuple[list[RefFact], int]:
    """Gives each reference made with a bare law name (``hint``) the longest
    known law key its hint ends with; returns (references kept, number
    dropped because no known law matched)."""
    laws = sorted(set(known_laws), key=len, reverse=True)
    kept, dropped = [], 0
    for ref in refs:
        if ref.law:
            kept.append(ref)
            continue
        law = next((k for k in laws if ref.hint.endswith(k)), None)
        if law is None:
            dropped += 1
            continue
        ref.law = law
        kept.append(ref)
    return kept, dropped


@dataclass(frozen=True, slots=True)
class Version:
    """One stored document at an article key, as VERSION_OF needs it."""

    id: str
    status: str
    current: bool


def bigram_similarity(a: str, b: str) -> float:
    """Dice coefficient of the character-bigram sets of ``a`` and ``b`` in
    [0, 1]; 0.0 when either has no bigram."""
    sa = {a[i:i + 2] for i in range(len(a) - 1)}
    sb = {b[i:i + 2] for i in range(len(b) - 1)}
    if not sa or not sb:
        return 0.0
    return 2 * len(sa & sb) / (len(sa) + len(sb))


def version_pairs(versions: Sequence[tuple[Version, str]]) -> list[tuple[str, str, float]]:
    """VERSION_OF edges among the stored documents of one article key:
    (non-current id, current id, bigram similarity of their texts) for
    every non-current document and every current one. ``versions`` pairs
    each Version with its text."""
    current = [(v, t) for v, t in versions if v.current]
    return [(old.id, new.id, round(bigram_similarity(old_text, new_text), 4))
            for old, old_text in versions if not old.current
            for new, new_text in current]


@dataclass(frozen=True, slots=True)
class ArticleEntry:
    """One stored article."""

    doc_id: str
    law: str
    article: str
    status: str
    current: bool
    first_chunk: str


@dataclass(slots=True)
class TermEntry:
    """A defined term and where it is defined.

    Attributes:
        name / law / definition / kind: as stored on the Term node.
        definers: (document id, provenance chunk id, current) of each
            defining article.
        words: content words of the definition (for lay matching).
        key: the Term node's key (``term_key``; "" when not from the store).
    """

    name: str
    law: str
    definition: str
    kind: str
    definers: list[tuple[str, str, bool]] = field(default_factory=list)
    words: frozenset[str] = frozenset()
    key: str = ""


@dataclass(frozen=True, slots=True)
class IndexHit:
    """A document found by one lookup: its chunk, score in [0, 1] and why."""

    doc_id: str
    chunk_id: str
    score: float
    evidence: str
