"""Deliberate cutting of over-long passages to a scorer's window.

A passage is "heading line\\nbody" (the gateway sends its heading path, a
newline, then the chunk text). When its tokens exceed the budget, the cut
keeps the heading line (at most half the budget) and the head of the body,
so the model still sees which law, article or entity the text belongs to
instead of losing the tail of one long string at the tokenizer.

Tokens are whatever ``spans`` returns: the (start, end) character offsets of
each token of each text, e.g. a Hugging Face fast tokenizer's offset mapping,
or one span per character for character budgets.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.reranker.scorer import Prepared

Spans = Callable[[Sequence[str]], list[list[tuple[int, int]]]]


@dataclass(frozen=True, slots=True)
class CutText:
    """A text after fitting: its text, its token count and whether it was cut."""

    text: str
    tokens: int
    cut: bool


def character_spans(texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """One span per character: budgets in characters."""
    return [[(i, i + 1) for i in range(len(t))] for t in texts]


def _head(text: str, spans: list[tuple[int, int]], keep: int) -> str:
    return text[: spans[keep - 1][1]] if keep > 0 else ""


def cut_text(text: str, spans: list[tuple[int, int]], budget: int) -> CutText:
    """The head of ``text`` holding at most ``budget`` tokens (no heading rule)."""
    if len(spans) <= budget:
        return CutText(text, len(spans), False)
    return CutText(_head(text, spans, budget), budget, True)


def cut_passages(passages: Sequence[str], budget: int, spans: Spans) -> list[CutText]:
    """Fits each passage into ``budget`` tokens.

    Args:
        passages: "heading line\\nbody" texts (no newline: all body).
        budget: most tokens per passage (>= 1).
        spans: token offsets of a batch of texts.
    Returns:
        one CutText per passage, in order; ``cut`` is True where the passage
        was shortened. A cut passage is the heading line (itself cut to half
        the budget when longer), a newline, and the body's first tokens.
    """
    budget = max(1, budget)
    whole = spans(list(passages))
    out: list[CutText | None] = [None] * len(passages)
    long_ones: list[int] = []
    for i, (text, sp) in enumerate(zip(passages, whole)):
        if len(sp) <= budget:
            out[i] = CutText(text, len(sp), False)
        else:
            long_ones.append(i)
    if long_ones:
        parts = [passages[i].partition("\n") for i in long_ones]
        heads = spans([h for h, _, _ in parts])
        bodies = spans([b for _, _, b in parts])
        for i, (heading, sep, body), h_sp, b_sp in zip(long_ones, parts, heads, bodies):
            if not sep:
                out[i] = cut_text(passages[i], whole[i], budget)
                continue
            h_keep = min(len(h_sp), budget // 2)
            b_keep = min(len(b_sp), budget - h_keep)
            text = _head(heading, h_sp, h_keep) + "\n" + _head(body, b_sp, b_keep)
            out[i] = CutText(text, h_keep + b_keep, True)
    return out  # type: ignore[return-value]


def fit_pairs(query: str, passages: list[str], max_length: int, max_query_share: float, spans: Spans) -> Prepared:
    """Fits (query, passage) pairs to a BERT-style pair window of
    ``max_length`` tokens ([CLS] query [SEP] passage [SEP]): the query cut
    to ``max_query_share`` of the window, each passage to what is left
    (cut_passages), with the tokens of each pair, specials included."""
    q_budget = max(1, int(max_length * max_query_share) - 2)
    fitted_query = cut_text(query, spans([query])[0], q_budget)
    budget = max_length - fitted_query.tokens - 3
    fitted = cut_passages(passages, budget, spans)
    return Prepared(query=fitted_query.text, passages=[f.text for f in fitted],
                    tokens=[fitted_query.tokens + f.tokens + 3 for f in fitted], truncated=sum(f.cut for f in fitted))
