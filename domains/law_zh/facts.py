"""What one stored document contributes to the document graph, without I/O.

``document_facts`` reads a chunked document (law articles: heading path
``[law, chapter, section, article]``, ``metadata["status"]``) and returns
its article key, the references, amendments, defined terms and offences
found in its chunks, each with its provenance chunk. ``version_pairs`` links
the versions of one article. The Neo4j
side is ``services.retriever_graph.doc_graph``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from services.common.records import DocumentRecord
from domains.law_zh import references as lr

#: Bumped whenever parsing changes: documents linked by an older version
#: report no content hash, so the next ingest sends them again.
DOCGRAPH_VERSION = 1
#: Status values of a document in force; a document without a status is
#: current too.
CURRENT_STATUSES = frozenset({"现行有效", "current", "in force"})
KEY_SEPARATOR = "#"


def key_of(law: str, article: str) -> str:
    """The ArticleKey node key of (law key, article key): "刑法#234"."""
    return f"{law}{KEY_SEPARATOR}{article}"


def term_key(law: str, name: str) -> str:
    """The Term node key of a term defined by law ``law``."""
    return f"{law}{KEY_SEPARATOR}{name}"


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
        offences: acts a penal article punishes (``legal_refs.find_offences``).
        text: the document's text (chunks joined, overlap not removed).
        first_chunk: id of its first chunk ("" without chunks).
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

    @property
    def key(self) -> str:
        """ArticleKey of the document, "" without an article number."""
        return key_of(self.law, self.article) if self.law and self.article else ""


def law_and_article(doc: DocumentRecord) -> tuple[str, str]:
    """(law name, article label) of a document: the first and last heading
    (the title when the path has one element); ("", "") without headings."""
    path = [p for p in doc.heading_path if p and p.strip()]
    if len(path) >= 2:
        return path[0], path[-1]
    return (doc.title or (path[0] if path else "")), (path[-1] if path else "")


def is_current(status: str) -> bool:
    """Whether a document of this status is in force."""
    return not status.strip() or status.strip() in CURRENT_STATUSES


def document_facts(doc: DocumentRecord) -> DocFacts:
    """Parses one document. Amending acts (刑法修正案, 关于修改《X》的决定)
    give AMENDS facts from their instructions and CITES facts from the
    quoted new text (which speaks of the amended law); other documents give
    CITES facts from their text and title (interpretations name the
    articles they interpret), defined terms and offences. References are
    deduplicated per (law, article, rel, kind), first chunk wins; a
    reference to the document itself (前款) is dropped."""
    law_name, label = law_and_article(doc)
    status = doc.metadata.get("status", "")
    facts = DocFacts(doc.id, lr.law_key(law_name) if law_name else "", lr.article_key(label) or "", status,
                     is_current(status))
    chunks = sorted(doc.chunks, key=lambda c: c.ordinal)
    facts.text = "\n".join(c.text for c in chunks)
    facts.first_chunk = chunks[0].id if chunks else ""
    if not law_name:
        return facts
    amended = lr.amended_law(law_name)
    own_law = lr.default_law(law_name)
    seen: set[tuple[str, str, str, str]] = set()

    def add(ref: RefFact) -> None:
        key = (ref.law or ref.hint, ref.article, ref.rel, ref.kind)
        if key in seen or (ref.rel == "CITES" and ref.law == facts.law and ref.article == facts.article):
            return
        seen.add(key)
        facts.refs.append(ref)

    if facts.first_chunk:
        for ref in lr.title_references(law_name):
            add(RefFact(ref.law or own_law, ref.article, "CITES", ref.kind, facts.first_chunk, 0))
    for chunk in chunks:
        text = chunk.text
        if amended:
            for a in lr.find_amendments(text, amended):
                add(RefFact(a.law or amended, a.article, "AMENDS", a.action, chunk.id, a.line))
            _, text = lr.split_instruction(text)
            own_article = None
        else:
            own_article = facts.article or None
        for ref in lr.find_references(text, own_article=own_article):
            if ref.kind == "previous_paragraph":
                continue
            law = ref.law or ("" if ref.hint else own_law)
            add(RefFact(law, ref.article, "CITES", ref.kind, chunk.id, ref.line, ref.hint))
        if not amended:
            for d in lr.find_definitions(chunk.text):
                if all(t.name != d.term for t in facts.terms):
                    facts.terms.append(TermFact(d.term, d.definition, d.kind, chunk.id))
    if not amended:
        facts.offences = lr.find_offences(facts.text)
    return facts


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
