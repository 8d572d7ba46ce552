"""Dense similarity for the extractive answer across scripts: an English
question over Chinese sources, or a Chinese one over English sources,
shares no word and no character bigram with the sentence that answers it,
so the extractive answer's word scoring alone quotes a source's first
sentences. When any of the first sources is in the other script, each
quotable piece of them is embedded passage-side by the expander and scored
by its cosine to the question as well (``extractive.extractive_answer``'s
``similarity``).

Only across scripts: within one script the cosine as a tie-breaker lost
quotes on the documents set (docs/benchmarks.md "Dense similarity in the
extractive answer"); across scripts it gained (docs/benchmarks.md "Quotes
across scripts"). A failing or slow expander leaves the word scoring alone.
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


async def piece_similarity(expander: Expander | None, question: str, texts: list[str], deadline: Deadline,
                           seconds: float, batch: int) -> dict[str, float] | None:
    """{piece text: cosine to ``question``} of the quotable pieces of the
    first SCRIPT_SOURCES ``texts`` (``extractive.pieces_to_embed``) when any
    of them is written in another script than the question
    (``other_script_sources``: every source of an English
    question over Chinese documents, or the English first source of a
    Chinese question among Chinese ones); None within one script, without
    an expander, or when an Embed call fails or runs out of ``seconds``
    (then the word scoring answers alone). ``batch``: texts per Embed call.

    Every piece is embedded, not only the other script's: the scaled
    cosines then compare across the sources, and an English source's
    pieces keep the cosine among themselves (over eight mixed trial sets
    and two sets written later, 185 quotes of the answering passage against
    179 with the other script's pieces alone and 172 with the three sources'
    script read together; docs/benchmarks.md "Quotes across scripts")."""
    if expander is None or not other_script_sources(question, texts):
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
        log.info("cross-script quote: no piece embeddings (%s); word scoring only", err)
        return None
    if len(vectors) != len(pieces):
        return None
    sims = np.asarray(vectors, dtype=np.float32) @ query
    return dict(zip(pieces, sims.tolist()))
