"""Parent context of a small chunk, without a store or gRPC: the text of
its section (the chunks of its document under the same heading_path, in
reading order) within a token budget centred on the chunk.

Small chunks rank better for one-line answers but cut a passage's
surroundings off (issue 24; MetaSearch keeps a parent context beside each
small chunk, the MetaSearch design (docs/references.md)). The chunker
(services.ingest.chunking) packs each section on its own, so a section's
chunks have consecutive ordinals and one heading_path, and each chunk after
the first starts with the trailing sentences of the previous one (the
overlap); ``parent_window`` removes that overlap and grows the window one
sentence at a time on alternating sides until the budget is spent.

Tokens are counted as the chunker counts them
(``services.ingest.sentences.count_tokens``: a CJK character, a Latin
word/number or a symbol is one).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.ingest.sentences import count_tokens, split_sentences

#: Default parent budget in tokens: two 256-token chunks' worth, centred on the hit.
DEFAULT_PARENT_TOKENS = 512


@dataclass(frozen=True, slots=True)
class SectionChunk:
    """One stored chunk of the hit's section.

    Attributes:
        ordinal: 0-based position of the chunk in its document.
        text: the chunk text as stored.
    """

    ordinal: int
    text: str


def overlap_prefix(previous: str, following: str) -> int:
    """Characters at the start of ``following`` that repeat the end of
    ``previous`` in whole sentences (the chunker's overlap): the longest run
    of ``following``'s leading sentences, joined and stripped, that
    ``previous`` ends with, and shorter than ``following`` itself. 0 when
    none.

    Returns:
        A character count into ``following`` (0 <= n < len(following)).
    """
    sentences = split_sentences(following)
    best, length = 0, 0
    for sentence in sentences[:-1]:  # a chunk is never all overlap
        length += len(sentence)
        head = following[:length].strip()
        if head and previous.rstrip().endswith(head):
            best = length
    return best


def section_run(hit_ordinal: int, chunks: Sequence[SectionChunk]) -> list[SectionChunk]:
    """The chunks of ``chunks`` (one section's, any order, duplicates
    allowed) whose ordinals run without a gap through ``hit_ordinal``, in
    reading order; [] when the hit's ordinal is not among them. A gap means
    another section (with the same headings) lies between: it is left out."""
    by_ordinal = {c.ordinal: c for c in chunks}
    if hit_ordinal not in by_ordinal:
        return []
    low = high = hit_ordinal
    while low - 1 in by_ordinal:
        low -= 1
    while high + 1 in by_ordinal:
        high += 1
    return [by_ordinal[o] for o in range(low, high + 1)]


def parent_window(hit_ordinal: int, chunks: Sequence[SectionChunk], budget_tokens: int = DEFAULT_PARENT_TOKENS) -> str:
    """The parent context of the chunk at ``hit_ordinal``.

    Args:
        hit_ordinal: the hit chunk's ordinal.
        chunks: chunks of the hit's document under the hit's heading_path
            (the hit among them), any order; others are ignored through
            ``section_run``.
        budget_tokens: the most tokens of the window (count_tokens); the
            hit's own text is always whole, even when it alone is longer.

    Returns:
        The hit's text with the sentences of its section before and after it
        added one at a time, alternating after / before, while the total stays
        within ``budget_tokens`` (a side that no longer fits stops, the other
        goes on); text from different chunks joined by a line break, overlaps
        removed. "" when nothing would be added (the hit is alone in its
        section, the budget is spent by the hit, or the hit is not in
        ``chunks``), so a caller can fall back to the chunk text.

    Raises:
        ValueError: ``budget_tokens`` is negative.
    """
    if budget_tokens < 0:
        raise ValueError("budget_tokens must be >= 0")
    run = section_run(hit_ordinal, chunks)
    if len(run) < 2:
        return ""
    at = next(i for i, c in enumerate(run) if c.ordinal == hit_ordinal)
    # Each chunk's own part: its text less the overlap it repeats from the previous chunk.
    own = [run[0].text.strip()]
    for prev, cur in zip(run, run[1:]):
        text = cur.text.strip()
        own.append(text[overlap_prefix(prev.text, text):].strip())
    hit_text = run[at].text.strip()
    if at > 0:  # the hit is whole, so the chunk before it gives up what the hit repeats
        head = hit_text[:overlap_prefix(run[at - 1].text, hit_text)].strip()
        if head and own[at - 1].endswith(head):
            own[at - 1] = own[at - 1][:-len(head)].rstrip()
    own[at] = hit_text
    used = count_tokens(hit_text)
    # Sentences before the hit (nearest first) and after it (nearest first),
    # each tagged with its chunk so pieces of different chunks get a line break.
    before = [(i, s) for i in range(at - 1, -1, -1) for s in reversed(split_sentences(own[i]))]
    after = [(i, s) for i in range(at + 1, len(run)) for s in split_sentences(own[i])]
    took_before: list[tuple[int, str]] = []
    took_after: list[tuple[int, str]] = []
    sides = [(after, took_after), (before, took_before)]
    open_sides = [True, True]
    turn = 0
    while any(open_sides):
        if open_sides[turn]:
            pool, taken = sides[turn]
            if len(taken) < len(pool) and used + count_tokens(pool[len(taken)][1]) <= budget_tokens:
                taken.append(pool[len(taken)])
                used += count_tokens(taken[-1][1])
            else:
                open_sides[turn] = False
        turn = 1 - turn
    if not took_before and not took_after:
        return ""
    pieces: list[tuple[int, str]] = [*reversed(took_before), (at, hit_text), *took_after]
    out: list[str] = []
    chunk_of_last = None
    for chunk, sentence in pieces:
        if out and chunk != chunk_of_last and not out[-1].endswith("\n"):
            out.append("\n")
        out.append(sentence)
        chunk_of_last = chunk
    return "".join(out).strip()
