"""A GBNF grammar (llama.cpp's constrained decoding) under which every
sentence of an answer ends with a citation mark of a packed source.

Small local models (Qwen2.5 1.5B) leave many sentences without a mark even
when told to cite each one; the citation verifier can then only re-attribute
or remove them. Under this grammar the model cannot end a sentence (or a clause
of one at "；") before it has written at least one mark ``[n]`` with 1 <= n <= the number of packed
sources, so the verifier judges marks rather than guessing them. Sent as the
request's ``grammar`` field, which llama.cpp's server (and so the local LLM
of ``graphmesh up --llm``) reads; other OpenAI-compatible servers reject or
ignore it, so the gateway sends it only when ``llm.citation_grammar`` is on.
"""
from __future__ import annotations

#: Characters a clause's body cannot hold: the marks' brackets, the clause
#: and sentence ends and line breaks (one paragraph, each clause cited).
_BODY = r"[^\[\]【】。！？!?；;\n]"

#: Most sentences in one answer (the prompts ask for one or two).
MAX_SENTENCES = 4

#: Most clauses joined by "；" in one sentence (a statute's list of items).
MAX_CLAUSES = 4


def citation_grammar(n_sources: int) -> str:
    """GBNF text: 1 to MAX_SENTENCES sentences, each 1 to MAX_CLAUSES
    clauses joined by "；"; every clause is a body of at least two
    characters then one or more marks ``[n]`` (1 <= n <= ``n_sources``);
    a sentence closes with 。！？ or a full stop; sentences optionally
    separated by a space. The clause is the unit the citation verifier
    checks (services.common.text.split_sentences ends one at ；), so each
    one the model writes carries the mark it is checked against.

    Raises:
        ValueError: when ``n_sources`` < 1 (nothing to cite).
    """
    if n_sources < 1:
        raise ValueError(f"n_sources must be at least 1, got {n_sources}")
    numbers = " | ".join(f'"{n}"' for n in range(1, n_sources + 1))
    return "\n".join([
        f'root ::= sentence (" "? sentence){{0,{MAX_SENTENCES - 1}}}',
        f'sentence ::= (clause "；"){{0,{MAX_CLAUSES - 1}}} clause end',
        "clause ::= body cite+",
        f"body ::= {_BODY} {_BODY}+",
        f'cite ::= "[" ({numbers}) "]"',
        'end ::= "。" | "！" | "？" | "."',
    ]) + "\n"
