"""The citation grammar's text: marks of existing sources only, every
sentence closed by a mark and an end. What llama.cpp makes of it is checked
against the real local LLM in tests/e2e/test_citation_grammar_llm.py."""
from __future__ import annotations

import re

import pytest

from services.gateway.answer.citation_grammar import MAX_CLAUSES, MAX_SENTENCES, citation_grammar

pytestmark = pytest.mark.unit


def rules(grammar: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())


def test_marks_name_each_packed_source_and_no_other():
    cite = rules(citation_grammar(3))["cite"]
    assert re.findall(r'"(\d+)"', cite) == ["1", "2", "3"]
    assert re.findall(r'"(\d+)"', rules(citation_grammar(12))["cite"])[-1] == "12"


def test_every_sentence_ends_with_at_least_one_mark_then_an_end():
    grammar = rules(citation_grammar(2))
    assert grammar["root"] == f'sentence (" "? sentence){{0,{MAX_SENTENCES - 1}}}'
    # a sentence is clauses joined by "；", each clause a body and its marks, then an end
    assert grammar["sentence"] == f'(clause "；"){{0,{MAX_CLAUSES - 1}}} clause end'
    assert grammar["clause"] == "body cite+"
    # a body cannot close a clause or sentence, or open a mark itself
    excluded = grammar["body"].split(" ")[0]
    assert excluded.startswith("[^") and grammar["body"] == f"{excluded} {excluded}+"
    for forbidden in ("。", "？", "！", "；", ";", "\\[", "\\]", "\\n"):
        assert forbidden in excluded, forbidden


def test_nothing_to_cite_is_refused():
    with pytest.raises(ValueError, match="n_sources"):
        citation_grammar(0)
