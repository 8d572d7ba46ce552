"""What one law article contributes to the document graph, without I/O.

``document_facts`` reads a chunked document (law articles: heading path
``[law, chapter, section, article]``, ``metadata["status"]``) and returns
its law and article key, the references, amendments, defined terms and
offences found in its chunks, each with its provenance chunk, in the
general fact shape of ``domains.facts``. The Neo4j side is
``services.retriever_graph.doc_graph``.
"""
from __future__ import annotations

from domains.facts import DocFacts, RefFact, TermFact
from domains.law_zh import references as lr
from services.common.records import DocumentRecord

#: Status values of a document in force; a document without a status is
#: current too. 已被修改 is the National Laws and Regulations Database's
#: status of a law in force that later acts have amended: in the corpus it is
#: the whole Criminal Law, whose amendments (刑法修正案) are documents of their
#: own, and no other version of it is stored.
CURRENT_STATUSES = frozenset({"现行有效", "已被修改", "current", "in force"})


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


