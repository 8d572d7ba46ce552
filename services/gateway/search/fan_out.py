"""The first-stage retrieval of Search: every retriever asked in parallel
under the caller's deadline, the keyword and vector parts of retriever_pg
merged when the query embedding came separately (split_retrieval), and the
error of a search no retriever answered."""
from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from graphmesh.common.v1 import types_pb2
from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common.errors import DownstreamError
from services.gateway.downstream.guard import Deadline, Trace, guarded
from services.gateway.downstream.interfaces import Retriever
from services.gateway.search.split_retrieval import keyword_part, merge_parts, vector_part
from services.gateway.search.understanding import Understanding, apply_embedding

PG = "retriever_pg"


async def retrieve_all(retrievers: list[Retriever], request: retriever_pb2.RetrieveRequest, deadline: Deadline,
                       trace: Trace, timeout: float, required: bool = False,
                       embedding: asyncio.Task | None = None, understood: Understanding | None = None,
                       adapt: Callable[[Understanding], list[float]] | None = None) -> list[fuser_pb2.CandidateList]:
    """Each retriever's candidates, asked in parallel; a failed one is
    left out (degraded). ``timeout``: seconds each call may take, within
    ``deadline``.

    With ``embedding`` (an ``embed_query`` task still on its way, its
    result copied into ``understood``), every retriever gets
    ``request``'s keyword part now, and retriever_pg its vector part
    (stage "retrieve.pg.vector") when the embedding is in; its two
    replies are merged into the list one combined request gives
    (split_retrieval), with ``adapt(understood)`` as its adapted embedding
    (pg.adapted; query_adapter.adapted_embedding) when given. No vector part
    is sent without a channel of it to run: a vector for pg.vector,
    pg.centred, pg.hyde or pg.adapted (the expander failed, or all are
    switched off) or a translation for pg.translated. The writing systems'
    centroids a reply carries are kept in ``understood``
    (``Understanding.script_centroids``).

    Raises:
        DownstreamError: none answered (any failure when ``required``),
            one error per retriever however many parts it was asked;
            or the caller's own error (INVALID_ARGUMENT) from a
            retriever or the embedding.
    """
    failures: list[DownstreamError] = []
    pg = next((r for r in retrievers if r.name == PG), None)

    async def one(retriever: Retriever, part: retriever_pb2.RetrieveRequest, stage: str):
        reply = await guarded(trace, stage, retriever.name, lambda t: retriever.retrieve(part, t), None, deadline,
                              timeout, failures=failures)
        if reply is None:
            return None
        # A channel the retriever could not run (an index still being
        # built) is shown to the caller under the retriever's own stage name.
        trace.timings.extend(t for t in reply.timings if t.status == types_pb2.STAGE_STATUS_DEGRADED)
        if understood is not None and reply.script_centroids:
            understood.script_centroids = {c.script: list(c.values) for c in reply.script_centroids}
        return list(reply.candidates)

    async def vector_candidates():
        if embedding is None:
            return None
        apply_embedding(understood, await embedding)
        adapted = adapt(understood) if adapt is not None else []
        off = set(request.disabled_channels)
        wanted = ((understood.embedding and not {names.PG_VECTOR, names.PG_CENTRED} <= off)
                  or (request.hyde_embedding and names.PG_HYDE not in off)
                  or (adapted and names.PG_ADAPTED not in off)
                  or (request.translation.words and names.PG_TRANSLATED not in off))
        if pg is None or not wanted:
            return None
        return await one(pg, vector_part(request, understood.embedding, adapted=adapted), names.retrieve_vector_stage(PG))

    first = request if embedding is None else keyword_part(request)
    *parts, vectors = await asyncio.gather(
        *(one(r, first, names.retrieve_stage(r.name)) for r in retrievers), vector_candidates())
    lists = []
    for retriever, candidates in zip(retrievers, parts):
        if retriever is pg and vectors is not None:
            candidates = merge_parts(vectors, candidates or [])
        if candidates is not None:
            lists.append(fuser_pb2.CandidateList(producer=retriever.name, candidates=candidates))
    if failures and (required or not lists):
        first_of_each = {f.service: f for f in reversed(failures)}
        raise none_answered(list(reversed(first_of_each.values())))
    return lists


def none_answered(failures: list[DownstreamError]) -> DownstreamError:
    """The error of a search no retriever answered: DEADLINE_EXCEEDED when
    every failure was a timeout, else UNAVAILABLE (or the first failure's
    own code for a single failed retriever)."""
    if len(failures) == 1:
        return failures[0]
    timed_out = all(f.code == grpc.StatusCode.DEADLINE_EXCEEDED for f in failures)
    code = grpc.StatusCode.DEADLINE_EXCEEDED if timed_out else grpc.StatusCode.UNAVAILABLE
    return DownstreamError("retrievers", code, "no retriever answered: " + "; ".join(str(f) for f in failures))
