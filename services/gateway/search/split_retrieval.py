"""One retriever's Retrieve asked in two parts: the channels that need no
query vector first, the vector channels once the query's embedding is in.

A cold question's embedding takes the expander longer (about 11 ms of CPU
on e5-small) than its analysis (keywords, question type: about 2 ms), and
BM25 and full text need only the keywords. So the gateway can send the
keyword part of retriever_pg's request as soon as the analysis is back and
the vector part when the embedding arrives, then merge the two replies into
the list one combined request would have given (``merge_parts``). Measured
in docs/benchmarks.md, "The keyword channels started before the query
embedding".
"""
from __future__ import annotations

from collections.abc import Sequence

from graphmesh.common.v1 import types_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names

#: The channels that read the request's query, HyDE or adapted embedding (pg.translated also ranks the
#: other writing system's chunks by cosine).
VECTOR_CHANNELS = (names.PG_VECTOR, names.PG_CENTRED, names.PG_HYDE, names.PG_ADAPTED, names.PG_TRANSLATED)
#: Vector channels that still run without an embedding (on their other list), so the keyword part switches them off.
_RUN_WITHOUT_EMBEDDING = (names.PG_TRANSLATED,)


def keyword_part(request: retriever_pb2.RetrieveRequest) -> retriever_pb2.RetrieveRequest:
    """``request`` without its query, HyDE and adapted embeddings and with
    pg.translated switched off: the vector channels do not run in it, every
    other channel runs as asked."""
    part = retriever_pb2.RetrieveRequest()
    part.CopyFrom(request)
    part.ClearField("query_embedding")
    part.ClearField("hyde_embedding")
    part.ClearField("adapted_embedding")
    part.disabled_channels[:] = sorted(set(request.disabled_channels) | set(_RUN_WITHOUT_EMBEDDING))
    return part


def vector_part(request: retriever_pb2.RetrieveRequest, embedding: Sequence[float],
                channels: Sequence[str] = names.PG_CHANNELS, adapted: Sequence[float] = ()) -> retriever_pb2.RetrieveRequest:
    """``request`` with ``embedding`` as its query embedding (and ``adapted``
    as its adapted embedding, when given) and every one of ``channels`` but
    VECTOR_CHANNELS switched off (those ``request`` switched off stay off)."""
    part = retriever_pb2.RetrieveRequest()
    part.CopyFrom(request)
    part.query_embedding[:] = list(embedding)
    if adapted:
        part.adapted_embedding[:] = list(adapted)
    off = set(request.disabled_channels) | {c for c in channels if c not in VECTOR_CHANNELS}
    part.disabled_channels[:] = sorted(off)
    return part


def merge_parts(vector_candidates: Sequence[types_pb2.Candidate],
                keyword_candidates: Sequence[types_pb2.Candidate]) -> list[types_pb2.Candidate]:
    """The candidates one combined Retrieve would have returned, from its
    two parts' replies.

    The retriever groups hits by chunk in channel order, vector channels
    first (services.common.convert.hits_to_candidates), so the combined list
    is the vector part's candidates, each followed in ``channel_scores`` by
    the keyword part's scores of the same chunk, then the keyword part's
    other candidates in their order. A chunk the vector part found keeps
    the vector part's source (its channels come first in the retriever's
    source priority); an empty ``context_text`` or ``embedding`` is filled
    from the keyword part. Channel ranks are per channel, so they are
    unchanged. The inputs are not modified.
    """
    merged: list[types_pb2.Candidate] = []
    by_id: dict[str, types_pb2.Candidate] = {}
    for cand in vector_candidates:
        copy = types_pb2.Candidate()
        copy.CopyFrom(cand)
        by_id[cand.id] = copy
        merged.append(copy)
    for cand in keyword_candidates:
        known = by_id.get(cand.id)
        if known is None:
            copy = types_pb2.Candidate()
            copy.CopyFrom(cand)
            by_id[cand.id] = copy
            merged.append(copy)
            continue
        known.channel_scores.extend(cand.channel_scores)
        if not known.context_text and cand.context_text:
            known.context_text = cand.context_text
        if not known.embedding and cand.embedding:
            known.embedding.extend(cand.embedding)
    return merged
