"""Dense similarity for the extractive answer: each quotable piece of the first
sources embedded passage-side by the expander and scored by its cosine to the
question (``extractive.extractive_answer``'s ``similarity``), added to the
word score with a weight (``similarity_weight``).

Across scripts (an English question over Chinese sources, or a Chinese one
over English sources) the question shares no word and no character bigram with
the sentence that answers it, so the word scoring alone quotes a source's
first sentences: there the cosine weighs 1 (docs/benchmarks.md "Quotes across
scripts"). Within one script it weighs the gateway's ``quote_similarity_weight``:
on the documents set alone it lost quotes as a tie-breaker (docs/benchmarks.md
"Dense similarity in the extractive answer"); over 33 own-document sets a weight
of 2, the words alone deciding whether a later source is quoted, quotes the
answering line 19 times more often (docs/benchmarks.md
"Dense similarity in the extractive answer, re-measured"). A failing or slow
expander leaves the word scoring alone.
"""
from __future__ import annotations

import asyncio
import logging

import numpy as np

from graphmesh.expander.v1 import expander_pb2
from services.common.errors import DownstreamError
from services.common.text import latin_script
from services.gateway.answer import extractive
from services.gateway.downstream.guard import Deadline
from services.gateway.downstream.interfaces import Expander

log = logging.getLogger("graphmesh.gateway.generate")
#: Sources whose script decides: the extractive answer quotes from the first three.
SCRIPT_SOURCES = 3


def cross_script(question: str, texts: list[str]) -> bool:
    """Whether ``question`` is in another script than its first
    SCRIPT_SOURCES ``texts`` together (``latin_script`` of their joined
    text): every source to quote is in the other script."""
    return bool(question and texts) and latin_script(question) != latin_script(" ".join(texts[:SCRIPT_SOURCES]))


def other_script_sources(question: str, texts: list[str], max_sources: int = SCRIPT_SOURCES) -> list[int]:
    """Indexes of the first ``max_sources`` texts written in another script
    than ``question`` (``latin_script`` of each): sources that share no word
    with it. [] without a question."""
    if not question:
        return []
    script = latin_script(question)
    return [i for i, text in enumerate(texts[:max_sources]) if latin_script(text) != script]


def similarity_weight(question: str, texts: list[str], same_script_weight: float) -> float:
    """The weight of the pieces' dense similarity beside their word score: 1 when any of the first
    SCRIPT_SOURCES ``texts`` is written in another script than ``question`` (``other_script_sources``: every
    source of an English question over Chinese documents, or the English first source of a Chinese question
    among Chinese ones), else ``same_script_weight`` (the gateway's ``quote_similarity_weight``)."""
    return 1.0 if other_script_sources(question, texts) else same_script_weight


async def piece_similarity(expander: Expander | None, question: str, texts: list[str], deadline: Deadline,
                           seconds: float, batch: int, weight: float = 1.0) -> dict[str, float] | None:
    """{piece text: cosine to ``question``} of the quotable pieces of the
    first SCRIPT_SOURCES ``texts`` (``extractive.pieces_to_embed``) when their
    similarity counts (``weight``, ``similarity_weight``, above 0); None when it
    does not, without an expander, or when an Embed call fails or runs out of ``seconds``
    (then the word scoring answers alone). ``batch``: texts per Embed call.

    Every piece is embedded, not only the other script's: the scaled
    cosines then compare across the sources, and an English source's
    pieces keep the cosine among themselves (over eight mixed trial sets
    and two sets written later, 185 quotes of the answering passage against
    179 with the other script's pieces alone and 172 with the three sources'
    script read together; docs/benchmarks.md "Quotes across scripts")."""
    if expander is None or weight <= 0 or not question:
        return None
    pieces = extractive.pieces_to_embed(texts, SCRIPT_SOURCES)
    if not pieces:
        return None
    try:
        asked = expander_pb2.EmbedRequest(texts=[question], kind=expander_pb2.EMBED_KIND_QUERY)
        query = np.asarray((await expander.embed(asked, deadline.left(seconds))).vectors[0].values, dtype=np.float32)
        vectors = []
        for start in range(0, len(pieces), batch):
            request = expander_pb2.EmbedRequest(texts=pieces[start:start + batch], kind=expander_pb2.EMBED_KIND_PASSAGE)
            vectors.extend(v.values for v in (await expander.embed(request, deadline.left(seconds))).vectors)
    except (DownstreamError, asyncio.TimeoutError, IndexError) as err:
        log.info("extractive quote: no piece embeddings (%s); word scoring only", err)
        return None
    if len(vectors) != len(pieces):
        return None
    sims = np.asarray(vectors, dtype=np.float32) @ query
    return dict(zip(pieces, sims.tolist()))
