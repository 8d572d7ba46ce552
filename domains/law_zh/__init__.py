"""law_zh: Chinese statutes (PRC laws, regulations and judicial
interpretations) as a domain pack.

- Question types: article lookups, case facts and lay consultations
  (``question_types.detect``), before the general cue rules.
- Document facts: each article's law and article key, its cross-references
  and amendments, the terms it defines, the offences it punishes and its
  status (``facts.document_facts``, over ``references``: the one parser of
  article references; numerals through services.common.numbers).
- Channels: graph.article, graph.offence, graph.term, graph.cites,
  graph.version (the graph retriever's lookups over those facts).
- Scope: a question about another country's law is out of scope
  (``scope.out_of_scope``): Answer abstains and says so.
- Citations: how answers name laws and articles (``citations``), for the
  citation verifier and the judge; a law is also asked by its title
  without the 中华人民共和国 prefix.
- Recipes: ``recipes.json`` (profiles per question type and the channel
  weights, with the command and figures that fitted them).
- Source caveat: an article of a repealed or historical version is cited
  with its status (``source_caveat``), so an answer never passes it off as
  the law in force.
- Query rewrite: article numbers in Arabic numerals are written as the
  statutes write them (第26条 -> 第二十六条) before keywords are cut
  (``rewrite_query``).
- Query adapter: ``query_adapter.npz``, a learned map of lay consultations'
  e5onnx vectors toward the articles that answer such questions, searched
  as channel pg.adapted (recipes.json "query_adapter" says how it was fitted).

``USAGE`` counts the calls into the pack's entry points by name; tests
assert through it that a collection of another pack runs no statute code.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from domains.law_zh import citations
from domains.law_zh.prompts import ANSWER_PROMPT, REWRITE_PROMPTS
from domains.pack import CitationRules, DomainPack, load_query_adapter, load_recipe

NAME = "law_zh"
#: Calls into the pack's entry points ("classify", "document_facts",
#: "query_lookups", "lookup_index", "out_of_scope", "source_caveat", "rewrite_query").
USAGE: Counter[str] = Counter()


def classify(query: str) -> tuple[str, float] | None:
    """Article lookup, case facts or lay consultation (question_types.detect)."""
    from domains.law_zh import question_types

    USAGE["classify"] += 1
    return question_types.detect(query)


def document_facts(document):
    """The document-graph facts of one law article (facts.document_facts)."""
    from domains.law_zh import facts

    USAGE["document_facts"] += 1
    return facts.document_facts(document)


def lookup_index(articles, terms, offences, word_tokens, version: int = 0):
    """The article, term and offence lookup tables (lookup_index.DocIndex)."""
    from domains.law_zh.lookup_index import DocIndex

    USAGE["lookup_index"] += 1
    return DocIndex(articles, terms, offences, word_tokens, version)


def out_of_scope(query: str) -> str | None:
    """Why a PRC law corpus cannot answer ``query`` (another country's law), or None (scope.out_of_scope)."""
    from domains.law_zh import scope

    USAGE["out_of_scope"] += 1
    return scope.out_of_scope(query)


def source_caveat(metadata) -> str:
    """The status of a source that is not in force ("已废止", "历史版本"), else "" (facts.is_current)."""
    from domains.law_zh import facts

    USAGE["source_caveat"] += 1
    status = str(metadata.get("status", "")).strip()
    return "" if facts.is_current(status) else status


def rewrite_query(query: str) -> str:
    """``query`` with its article numbers in Arabic numerals written as the statutes write them (references
    .article_numbers_in_chinese): 民法典第1077条 -> 民法典第一千零七十七条."""
    from domains.law_zh import references

    USAGE["rewrite_query"] += 1
    return references.article_numbers_in_chinese(query)


_HERE = Path(__file__).resolve().parent
_RECIPE = load_recipe(_HERE / "recipes.json")
_ADAPTER = _RECIPE.get("query_adapter")

PACK = DomainPack(
    name=NAME,
    description="Chinese statutes: article references, amendments, defined terms, offences, versions",
    classify=classify,
    question_types=("QUESTION_TYPE_ARTICLE_LOOKUP", "QUESTION_TYPE_CASE_FACTS", "QUESTION_TYPE_LAY_CONSULTATION"),
    document_facts=document_facts,
    channels=("graph.article", "graph.offence", "graph.term", "graph.cites", "graph.version"),
    profiles=_RECIPE["profiles"],
    channel_weights=_RECIPE.get("channel_weights", {}),
    abstention_fits=_RECIPE["abstention"]["fits"],
    out_of_scope=out_of_scope,
    recipe_source=_RECIPE.get("source", ""),
    citations=CitationRules(source_names=citations.SOURCE_NAMES, source_name_word=citations.SOURCE_NAME_WORD,
                            cited_units=citations.cited_articles, named_groups=citations.named_laws),
    title_aliases=citations.title_aliases,
    lookup_index=lookup_index,
    answer_prompt=ANSWER_PROMPT,
    rewrite_prompts=REWRITE_PROMPTS,
    query_adapter=load_query_adapter(_HERE / _ADAPTER["file"], _ADAPTER["source"]) if _ADAPTER else None,
    source_caveat=source_caveat,
    rewrite_query=rewrite_query,
)
